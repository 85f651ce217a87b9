"""The protobuf schema table against kube-apiserver 1.33's OpenAPI definitions (an independent
source): the same JSON field names, the same JSON types, and every field OpenAPI calls required
written even when zero."""

from __future__ import annotations

import json
from typing import Any

from emulator.pbschema import MESSAGES, Field
from emulator.schema import DATA_FILE

DEFINITIONS: dict[str, Any] = json.loads(DATA_FILE.read_text())["schemas"]
_CORE, _DISCOVERY = "io.k8s.api.core.v1", "io.k8s.api.discovery.v1"
# Table messages whose Go type name is ambiguous, or renamed in the table.
ALIASES = {
    "EndpointPort": f"{_CORE}.EndpointPort",
    "Event": f"{_CORE}.Event",
    "EventSeries": f"{_CORE}.EventSeries",
    "EventsEvent": "io.k8s.api.events.v1.Event",
    "EventsEventSeries": "io.k8s.api.events.v1.EventSeries",
    "SliceEndpoint": f"{_DISCOVERY}.Endpoint",
    "SliceEndpointConditions": f"{_DISCOVERY}.EndpointConditions",
    "SliceEndpointHints": f"{_DISCOVERY}.EndpointHints",
    "SliceEndpointPort": f"{_DISCOVERY}.EndpointPort",
}
# Fields added after 1.33 (their numbers are in newer generated.proto files).
NEWER = {
    ("Container", "restartPolicyRules"), ("EphemeralContainer", "restartPolicyRules"),
    ("DeploymentSpec", "podReplacementPolicy"), ("EnvVarSource", "fileKeyRef"),
    ("HorizontalPodAutoscalerCondition", "observedGeneration"), ("PodSpec", "hostnameOverride"),
    ("PodStatus", "extendedResourceClaimStatus"), ("VolumeProjection", "podCertificate"),
}  # fmt: skip
# `+optional` fields whose Go JSON tag still has no omitempty: OpenAPI does not call them
# required, yet encoding/json writes their zero value (null for a nil slice).
OPTIONAL_WITHOUT_OMITEMPTY = {
    ("ClusterRole", "rules"), ("Role", "rules"), ("ContainerImage", "names"),
    ("CustomResourceDefinitionStatus", "storedVersions"), ("Event", "reportingComponent"),
    ("Event", "reportingInstance"), ("GRPCAction", "service"),
    ("HorizontalPodAutoscalerStatus", "currentMetrics"), ("NodeRuntimeHandler", "name"),
    ("ProjectedVolumeSource", "sources"), ("StatefulSetOrdinals", "start"),
    ("StatefulSetStatus", "availableReplicas"),
}  # fmt: skip


def _definition(message: str) -> str | None:
    if message in ALIASES:
        return ALIASES[message]
    found = [name for name in DEFINITIONS if name.rsplit(".", 1)[-1] == message]
    return found[0] if len(found) == 1 else None


def _fields(message: str) -> dict[str, Field]:
    """JSON name -> field, embedded structs' fields inlined."""
    out: dict[str, Field] = {}
    for field in MESSAGES[message]:
        if field.inline:
            out.update(_fields(field.type[4:]))
        else:
            out[field.name] = field
    return out


def _json_type_matches(prop: dict[str, Any], field: Field) -> bool:
    kind = prop.get("type")
    ref = prop.get("$ref") or (prop.get("allOf") or [{}])[0].get("$ref", "")
    if kind == "array":
        return field.repeated
    if kind == "object" and "additionalProperties" in prop:
        return field.is_map
    if kind == "integer":
        return field.type == ("int64" if prop.get("format") == "int64" else "int32")
    if kind == "boolean":
        return field.type == "bool"
    if kind == "number":
        return field.type == "double"
    if kind == "string":
        formats = {"byte": {"bytes"}, "date-time": {"time", "microtime"}}
        return field.type in formats.get(prop.get("format", ""), {"string"})
    if ref.endswith(".Quantity"):
        return field.type == "quantity"
    if ref.endswith(".IntOrString"):
        return field.type == "intorstr"
    if ref.endswith((".Time", ".MicroTime")):
        return field.type in ("time", "microtime")
    if ref:
        return field.type.startswith("msg:") or field.type in ("raw", "orbool", "orarray")
    return True


def _compared() -> list[tuple[str, str]]:
    pairs = [(m, _definition(m)) for m in sorted(MESSAGES)]
    return [(m, d) for m, d in pairs if d is not None]


def test_most_messages_have_an_openapi_definition_to_check() -> None:
    assert len(_compared()) >= 200


def test_json_names_match_openapi() -> None:
    differences = []
    for message, definition in _compared():
        props = set(DEFINITIONS[definition].get("properties", {}))
        ours = {name for name in _fields(message) if (message, name) not in NEWER}
        if not {"apiVersion", "kind"} & ours:  # a kind: its TypeMeta travels in the envelope
            props -= {"apiVersion", "kind"}
        if props != ours:
            differences.append((message, sorted(props - ours), sorted(ours - props)))
    assert differences == []


def test_json_types_match_openapi() -> None:
    wrong = []
    for message, definition in _compared():
        props = DEFINITIONS[definition].get("properties", {})
        for name, field in _fields(message).items():
            if name in props and not _json_type_matches(props[name], field):
                wrong.append(f"{message}.{name}: {props[name]} vs {field}")
    assert wrong == []


def test_required_fields_are_written_when_zero() -> None:
    """A required field has no omitempty; an optional one has, unless listed above."""
    wrong = []
    for message, definition in _compared():
        required = set(DEFINITIONS[definition].get("required", []))
        for name, field in _fields(message).items():
            if field.is_struct and not field.pointer:
                continue  # encoding/json writes value structs either way
            expected = name in required or (message, name) in OPTIONAL_WITHOUT_OMITEMPTY
            if field.keep_zero != expected:
                wrong.append(f"{message}.{name}: required={name in required}")
    assert wrong == []
