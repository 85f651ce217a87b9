"""Type schemas: OpenAPI v3 validation, pruning, defaulting and field metadata.

One `TypeSchema` per served kind. Built-in kinds come from the checked-in data file
`schemas/kubernetes-v1.33.json` (see tools/gen_k8s_schemas.py for its provenance); custom
resources get theirs from the CRD's `openAPIV3Schema`.

Causes and messages follow kube-apiserver: the structural validation of custom resources
(kube-openapi's validator, converted to field errors by apiextensions-apiserver) prints
`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`,
and field paths use `spec.containers[0].name`. Built-in kinds are validated for types, required
fields and enums (kube validates them by hand; this is the part of it that users meet most).

Order of use in a write: `prune` (unknown fields, for fieldValidation), `default`, `validate`.
For built-in kinds a type mismatch is a decoding error (400), see `decode_error`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime
import ipaddress
import json
import math
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any, cast

from emulator import errors
from emulator.fieldmeta import UNKNOWN, FieldInfo, ListType

Schema = dict[str, Any]
Cause = dict[str, Any]
Defaulter = Callable[[dict[str, Any]], None]

REF_PREFIX = "#/components/schemas/"
DATA_FILE = Path(__file__).with_name("schemas") / "kubernetes-v1.33.json"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# Fields kube's hand-written validation requires although the OpenAPI marks them optional.
_EXTRA_REQUIRED: dict[str, tuple[str, ...]] = {
    "io.k8s.api.core.v1.Container": ("image",),
}

# Enums kube's hand-written validation enforces that the published OpenAPI does not list.
_BUILTIN_ENUMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("io.k8s.api.core.v1.Container", "imagePullPolicy"): ("Always", "IfNotPresent", "Never"),
    ("io.k8s.api.core.v1.PodSpec", "restartPolicy"): ("Always", "OnFailure", "Never"),
    ("io.k8s.api.core.v1.ServiceSpec", "type"): (
        "ClusterIP",
        "ExternalName",
        "LoadBalancer",
        "NodePort",
    ),
    ("io.k8s.api.core.v1.ContainerPort", "protocol"): ("SCTP", "TCP", "UDP"),
    ("io.k8s.api.core.v1.ServicePort", "protocol"): ("SCTP", "TCP", "UDP"),
    ("io.k8s.api.apps.v1.DeploymentStrategy", "type"): ("Recreate", "RollingUpdate"),
}

# Root fields every object may carry, whatever its schema lists.
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


# ---------------------------------------------------------------------------- data


@cache
def _builtin_doc() -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(DATA_FILE.read_text()))


def builtin_definitions() -> dict[str, Schema]:
    """All built-in component schemas, by their kube-apiserver names."""
    return cast(dict[str, Schema], _builtin_doc()["schemas"])


def builtin_kubernetes_version() -> str:
    return cast(str, _builtin_doc()["kubernetesVersion"])


@cache
def _gvk_index() -> dict[tuple[str, str, str], str]:
    index: dict[tuple[str, str, str], str] = {}
    for name, schema in builtin_definitions().items():
        gvks = schema.get("x-kubernetes-group-version-kind") or []
        if len(gvks) != 1:  # shared meta kinds (DeleteOptions, WatchEvent) are not served kinds
            if name.endswith(".Status") or name.endswith(".APIResourceList"):
                gvks = gvks[:1]
            else:
                continue
        g = gvks[0]
        index[(g["group"], g["version"], g["kind"])] = name
    return index


# ---------------------------------------------------------------------------- formatting


def go_value(value: Any) -> str:
    """A value as kube's field errors print it (Go %v for scalars, %q for strings, JSON else)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _go_float(value: float) -> str:
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mant, exp = text.split("e")
        sign = "-" if exp.startswith("-") else "+"
        return f"{mant}e{sign}{exp.lstrip('+-').zfill(2)}"
    return text


def _body(kind: str, value: Any = None, detail: str = "", *, show_value: bool = True) -> str:
    text = kind
    if show_value:
        text += f": {go_value(value)}"
    if detail:
        text += f": {detail}"
    return text


def required(field: str, detail: str = "") -> Cause:
    return errors.field_cause(
        "FieldValueRequired", field, _body("Required value", None, detail, show_value=False)
    )


def invalid(field: str, value: Any, detail: str) -> Cause:
    return errors.field_cause("FieldValueInvalid", field, _body("Invalid value", value, detail))


def type_invalid(field: str, value: Any, detail: str) -> Cause:
    return errors.field_cause("FieldValueTypeInvalid", field, _body("Invalid value", value, detail))


def not_supported(field: str, value: Any, allowed: list[Any]) -> Cause:
    names = [v if isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in allowed]
    detail = "supported values: " + ", ".join(json.dumps(v) for v in names) if names else ""
    return errors.field_cause(
        "FieldValueNotSupported", field, _body("Unsupported value", value, detail)
    )


def duplicate(field: str, value: Any) -> Cause:
    return errors.field_cause("FieldValueDuplicate", field, _body("Duplicate value", value))


def too_long(field: str, max_length: int) -> Cause:
    return errors.field_cause(
        "FieldValueTooLong",
        field,
        _body("Too long", None, f"may not be longer than {max_length}", show_value=False),
    )


def too_many(field: str, actual: int, max_items: int) -> Cause:
    return errors.field_cause(
        "FieldValueTooMany",
        field,
        _body("Too many", actual, f"must have at most {max_items} items"),
    )


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _index(path: str, i: int) -> str:
    return f"{path}[{i}]"


# ---------------------------------------------------------------------------- schema helpers


def _matches_type(value: Any, wanted: str) -> bool:
    actual = json_type(value)
    if actual == wanted:
        return True
    if wanted == "number" and actual == "integer":
        return True
    # JSON has one number type: 3.0 is an integer to kube's validator.
    return wanted == "integer" and isinstance(value, float) and value.is_integer()


def _is_int_or_string(schema: Schema) -> bool:
    return bool(schema.get("x-kubernetes-int-or-string")) or schema.get("format") == "int-or-string"


class TypeSchema:
    """The schema of one kind, with everything the emulator does with it.

    `openapi` is the root schema; `definitions` resolves its `$ref`s (`#/components/schemas/X`).
    `builtin` selects kube's built-in behaviour (hand-validation subset, decoding errors, Go zero
    values for nulls) over the custom-resource one.
    """

    def __init__(
        self,
        schema: Schema,
        *,
        definitions: Mapping[str, Schema] | None = None,
        name: str = "",
        builtin: bool = False,
        defaulter: Defaulter | None = None,
    ) -> None:
        self.openapi = schema
        self.definitions: Mapping[str, Schema] = definitions or {}
        self.name = name
        self.builtin = builtin
        self.defaulter = defaulter
        self._field_cache: dict[tuple[str, ...], FieldInfo] = {}

    @classmethod
    def from_openapi(
        cls, schema: Schema, *, definitions: Mapping[str, Schema] | None = None, name: str = ""
    ) -> TypeSchema:
        """A schema given in OpenAPI v3 form (CRD-style validation semantics)."""
        return cls(schema, definitions=definitions or builtin_definitions(), name=name)

    # ------------------------------------------------------------------ refs

    def resolve(self, schema: Schema) -> Schema:
        """Follows `$ref` and single-element `allOf` wrappers to the schema that has the shape."""
        seen = 0
        while seen < 32:
            seen += 1
            ref = schema.get("$ref")
            if isinstance(ref, str):
                target = self.definitions.get(ref.removeprefix(REF_PREFIX))
                if target is None:
                    return {}
                schema = target
                continue
            all_of = schema.get("allOf")
            if (
                isinstance(all_of, list)
                and len(all_of) == 1
                and "properties" not in schema
                and "type" not in schema
            ):
                schema = all_of[0]
                continue
            return schema
        return schema

    def _extensions(self, schema: Schema) -> Schema:
        """The property schema merged over what it refers to (extensions may sit on either)."""
        resolved = self.resolve(schema)
        if resolved is schema:
            return schema
        merged = dict(resolved)
        merged.update({k: v for k, v in schema.items() if k != "$ref"})
        return merged

    def components(self) -> dict[str, Schema]:
        """The named root (when named) and every definition it refers to, for OpenAPI documents."""
        out: dict[str, Schema] = {}
        if self.name:
            out[self.name] = self.openapi
        todo = list(_refs(self.openapi))
        while todo:
            name = todo.pop()
            if name in out or name not in self.definitions:
                continue
            out[name] = self.definitions[name]
            todo.extend(_refs(out[name]))
        return out

    # ------------------------------------------------------------------ FieldMeta

    def field(self, path: tuple[str, ...]) -> FieldInfo:
        cached = self._field_cache.get(path)
        if cached is not None:
            return cached
        info = self._field(path)
        self._field_cache[path] = info
        return info

    def _field(self, path: tuple[str, ...]) -> FieldInfo:
        if not path:
            return self._info(self.openapi)
        node: Schema | None = self.openapi
        for name in path:
            if node is None:
                return UNKNOWN
            shape = self.resolve(node)
            # List items are not counted in the path: step through arrays.
            while shape.get("type") == "array" and isinstance(shape.get("items"), dict):
                shape = self.resolve(shape["items"])
            node = self._property(shape, name)
        return self._info(node) if node is not None else UNKNOWN

    def _property(self, shape: Schema, name: str) -> Schema | None:
        props = shape.get("properties") or {}
        if name in props:
            return cast(Schema, props[name])
        if not props and shape.get("x-kubernetes-embedded-resource") and name == "metadata":
            return {"$ref": REF_PREFIX + OBJECT_META}
        extra = shape.get("additionalProperties")
        if isinstance(extra, dict):
            return extra
        if name == "metadata" and shape is self.resolve(self.openapi):
            return {"$ref": REF_PREFIX + OBJECT_META}
        return None

    def _info(self, node: Schema) -> FieldInfo:
        merged = self._extensions(node)
        list_type = merged.get("x-kubernetes-list-type")
        map_type = merged.get("x-kubernetes-map-type")
        return FieldInfo(
            list_type=cast(ListType, list_type) if list_type in ("atomic", "set", "map") else None,
            list_map_keys=tuple(merged.get("x-kubernetes-list-map-keys") or ()),
            map_type="atomic" if map_type == "atomic" else "granular",
            patch_merge_key=merged.get("x-kubernetes-patch-merge-key"),
            patch_strategy=merged.get("x-kubernetes-patch-strategy") or "",
        )

    # ------------------------------------------------------------------ validation

    def validate(self, obj: Any) -> list[Cause]:
        """Causes for everything wrong with `obj` (empty when valid)."""
        causes: list[Cause] = []
        root = self.resolve(self.openapi)
        if not isinstance(obj, dict):
            causes.append(
                type_invalid("", obj, f"must be of type object: {json.dumps(json_type(obj))}")
            )
            return causes
        for key, value in obj.items():
            if key in _ROOT_FIELDS:
                if key == "metadata" and self.builtin:
                    sub = (root.get("properties") or {}).get("metadata")
                    if sub is not None:
                        self._validate(sub, value, key, causes, in_status=False)
                continue
            sub = (root.get("properties") or {}).get(key)
            if sub is not None:
                self._validate(sub, value, key, causes, in_status=key == "status")
        for name in root.get("required") or ():
            missing = name not in obj or (self.builtin and obj[name] is None)
            if name not in _ROOT_FIELDS and missing:
                causes.append(required(name))
        return causes

    def _validate(
        self, schema: Schema, value: Any, path: str, causes: list[Cause], *, in_status: bool
    ) -> None:
        shape = self.resolve(schema)
        ref = schema.get("$ref")
        definition = ref.removeprefix(REF_PREFIX) if isinstance(ref, str) else ""
        if value is None:
            if self.builtin or shape.get("nullable") or schema.get("nullable"):
                return
            wanted = shape.get("type") or ("integer,string" if _is_int_or_string(shape) else "")
            if wanted:
                causes.append(_type_cause(path, str(wanted), value))
            return
        # int-or-string first: it carries a type-less anyOf in CRDs.
        if _is_int_or_string(shape):
            if not (json_type(value) in ("integer", "string") or _matches_type(value, "integer")):
                causes.append(_type_cause(path, "integer,string", value))
                return
        else:
            wanted = shape.get("type")
            if isinstance(wanted, str) and not _matches_type(value, wanted):
                causes.append(_type_cause(path, wanted, value))
                return
            if (
                "oneOf" in shape
                and "properties" not in shape
                and "type" not in shape
                and self.builtin
            ):
                kinds = [s.get("type") for s in shape["oneOf"]]
                if not any(isinstance(k, str) and _matches_type(value, k) for k in kinds):
                    causes.append(_type_cause(path, ",".join(str(k) for k in kinds), value))
                return
        if not (self.builtin and in_status):
            self._validate_enum(shape, value, path, causes)
        if not self.builtin:
            self._validate_value(shape, value, path, causes)
        if isinstance(value, dict):
            self._validate_object(shape, definition, value, path, causes, in_status=in_status)
        elif isinstance(value, list):
            self._validate_array(shape, value, path, causes, in_status=in_status)

    def _validate_enum(self, shape: Schema, value: Any, path: str, causes: list[Cause]) -> None:
        enum = shape.get("enum")
        if not isinstance(enum, list) or value in enum:
            return
        if self.builtin and value == "":
            return
        causes.append(not_supported(path, value, enum))

    def _validate_value(self, shape: Schema, value: Any, path: str, causes: list[Cause]) -> None:
        """String, number and combinator constraints (custom resources only)."""
        where = f"{path} in body"
        if isinstance(value, str):
            n = len(value)
            if "maxLength" in shape and n > shape["maxLength"]:
                causes.append(too_long(path, int(shape["maxLength"])))
            if "minLength" in shape and n < shape["minLength"]:
                causes.append(
                    invalid(
                        path, value, f"{where} should be at least {shape['minLength']} chars long"
                    )
                )
            pattern = shape.get("pattern")
            if isinstance(pattern, str) and not _search(pattern, value):
                causes.append(invalid(path, value, f"{where} should match '{pattern}'"))
            fmt = shape.get("format")
            if isinstance(fmt, str) and not _format_ok(fmt, value):
                causes.append(
                    type_invalid(path, value, f"{where} must be of type {fmt}: {json.dumps(value)}")
                )
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self._validate_number(shape, value, path, causes)
        for key, word in (("allOf", "all"), ("anyOf", "any"), ("oneOf", "one")):
            subs = shape.get(key)
            if not isinstance(subs, list) or _is_int_or_string(shape):
                continue
            results = []
            for sub in subs:
                found: list[Cause] = []
                self._validate(sub, value, path, found, in_status=False)
                results.append(found)
            ok = sum(1 for r in results if not r)
            if word == "all":
                for r in results:
                    causes.extend(r)
            elif word == "any" and ok == 0:
                causes.append(
                    invalid(path, value, f"{where} must validate at least one schema (anyOf)")
                )
                for r in results:
                    causes.extend(r)
            elif word == "one" and ok != 1:
                causes.append(
                    invalid(path, value, f"{where} must validate one and only one schema (oneOf)")
                )
        not_schema = shape.get("not")
        if isinstance(not_schema, dict):
            found = []
            self._validate(not_schema, value, path, found, in_status=False)
            if not found:
                causes.append(invalid(path, value, f"{where} must not validate the schema (not)"))

    def _validate_number(self, shape: Schema, value: float, path: str, causes: list[Cause]) -> None:
        where = f"{path} in body"
        if "maximum" in shape:
            top = shape["maximum"]
            if shape.get("exclusiveMaximum") and value >= top:
                causes.append(invalid(path, value, f"{where} should be less than {go_value(top)}"))
            elif value > top:
                causes.append(
                    invalid(path, value, f"{where} should be less than or equal to {go_value(top)}")
                )
        if "minimum" in shape:
            low = shape["minimum"]
            if shape.get("exclusiveMinimum") and value <= low:
                causes.append(
                    invalid(path, value, f"{where} should be greater than {go_value(low)}")
                )
            elif value < low:
                causes.append(
                    invalid(
                        path, value, f"{where} should be greater than or equal to {go_value(low)}"
                    )
                )
        step = shape.get("multipleOf")
        if (
            isinstance(step, (int, float))
            and step
            and not math.isclose(value / step, round(value / step))
        ):
            causes.append(invalid(path, value, f"{where} should be a multiple of {go_value(step)}"))

    def _validate_object(
        self,
        shape: Schema,
        definition: str,
        value: dict[str, Any],
        path: str,
        causes: list[Cause],
        *,
        in_status: bool,
    ) -> None:
        props: dict[str, Schema] = shape.get("properties") or {}
        if shape.get("x-kubernetes-embedded-resource"):
            for key in ("apiVersion", "kind"):
                if key not in value and not shape.get("x-kubernetes-preserve-unknown-fields"):
                    causes.append(required(_child(path, key)))
        if not (self.builtin and in_status):
            names = list(shape.get("required") or ())
            if self.builtin:
                names += [n for n in _EXTRA_REQUIRED.get(definition, ()) if n not in names]
            for name in names:
                present = name in value and not (self.builtin and value[name] in (None, ""))
                if not present:
                    causes.append(required(_child(path, name)))
        if not self.builtin:
            where = f"{path} in body"
            if "maxProperties" in shape and len(value) > shape["maxProperties"]:
                causes.append(too_many(path, len(value), int(shape["maxProperties"])))
            if "minProperties" in shape and len(value) < shape["minProperties"]:
                causes.append(
                    invalid(
                        path,
                        value,
                        f"{where} should have at least {shape['minProperties']} properties",
                    )
                )
        extra = shape.get("additionalProperties")
        for key, item in value.items():
            allowed = _BUILTIN_ENUMS.get((definition, key)) if self.builtin else None
            if allowed and not in_status and item not in allowed:
                causes.append(not_supported(_child(path, key), item, list(allowed)))
                continue
            sub = props.get(key)
            if sub is None and isinstance(extra, dict):
                sub = extra
            if sub is None:
                continue
            self._validate(sub, item, _child(path, key), causes, in_status=in_status)

    def _validate_array(
        self, shape: Schema, value: list[Any], path: str, causes: list[Cause], *, in_status: bool
    ) -> None:
        where = f"{path} in body"
        if not self.builtin:
            if "maxItems" in shape and len(value) > shape["maxItems"]:
                causes.append(too_many(path, len(value), int(shape["maxItems"])))
            if "minItems" in shape and len(value) < shape["minItems"]:
                # kube-openapi reports the list's length as the invalid value, not the list.
                causes.append(
                    invalid(
                        path, len(value), f"{where} should have at least {shape['minItems']} items"
                    )
                )
            if shape.get("uniqueItems") and len({go_value(v) for v in value}) != len(value):
                causes.append(invalid(path, value, f"{where} shouldn't contain duplicates"))
        items = shape.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                self._validate(items, item, _index(path, i), causes, in_status=in_status)
        self._validate_list_type(shape, value, path, causes)

    def _validate_list_type(
        self, shape: Schema, value: list[Any], path: str, causes: list[Cause]
    ) -> None:
        list_type = shape.get("x-kubernetes-list-type")
        if list_type == "set":
            seen: set[str] = set()
            for i, item in enumerate(value):
                key = go_value(item)
                if key in seen:
                    causes.append(duplicate(_index(path, i), item))
                seen.add(key)
        elif list_type == "map":
            keys = list(shape.get("x-kubernetes-list-map-keys") or ())
            seen_keys: set[str] = set()
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                ident = {k: item.get(k) for k in keys if k in item}
                marker = go_value(ident)
                if marker in seen_keys:
                    if self.builtin and len(keys) == 1 and keys[0] in item:
                        causes.append(duplicate(_child(_index(path, i), keys[0]), item[keys[0]]))
                    else:
                        causes.append(duplicate(_index(path, i), ident))
                seen_keys.add(marker)

    def decode_error(self, obj: dict[str, Any], kind: str, version: str) -> errors.ApiError | None:
        """For built-in kinds: the 400 kube-apiserver's JSON decoder gives for a type mismatch."""
        for cause in self.validate(obj):
            if cause["reason"] != "FieldValueTypeInvalid":
                continue
            field = cause["field"]
            got = cause["message"].split(": ", 2)[1] if ": " in cause["message"] else ""
            return errors.bad_request(
                f'{kind} in version "{version}" cannot be handled as a {kind}: json: cannot unmarshal '
                f"{_go_json_kind(got)} into Go struct field {self._go_struct(field)}{field} "
                f"of type {self._go_type(field)}"
            )
        return None

    def _go_struct(self, field: str) -> str:
        """The Go type holding the last field, as encoding/json names it ("DeploymentSpec.")."""
        holder = self.name.rsplit(".", 1)[-1]
        node: Schema | None = self.openapi
        names = re.sub(r"\[\d+\]", "", field).split(".")
        for name in names[:-1]:
            if node is None:
                break
            shape = self.resolve(node)
            while shape.get("type") == "array" and isinstance(shape.get("items"), dict):
                node = shape["items"]
                shape = self.resolve(node)
            node = self._property(shape, name)
            if node is not None:
                inner = node.get("items") if isinstance(node.get("items"), dict) else node
                ref = inner.get("$ref") if isinstance(inner, dict) else None
                if isinstance(ref, str):
                    holder = ref.rsplit(".", 1)[-1]
        return f"{holder}." if holder else ""

    def _go_type(self, field: str) -> str:
        node: Schema | None = self.openapi
        for name in re.sub(r"\[\d+\]", "", field).split("."):
            if node is None:
                break
            shape = self.resolve(node)
            while shape.get("type") == "array" and isinstance(shape.get("items"), dict):
                shape = self.resolve(shape["items"])
            node = self._property(shape, name)
        if node is None:
            return "interface {}"
        shape = self.resolve(node)
        kind = shape.get("type")
        fmt = shape.get("format")
        if kind == "integer":
            return str(fmt or "int64")
        if kind == "number":
            return "float64"
        if kind == "boolean":
            return "bool"
        if kind == "string":
            return "string"
        if kind == "array":
            return "[]" + str(self._ref_name(shape.get("items") or {}) or "string")
        if isinstance(shape.get("additionalProperties"), dict):
            return "map[string]string"
        return str(self._ref_name(node) or "struct")

    @staticmethod
    def _ref_name(schema: Schema) -> str:
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return ""
        parts = ref.removeprefix(REF_PREFIX).split(".")
        return f"{parts[-2]}.{parts[-1]}" if len(parts) >= 2 else parts[-1]

    # ------------------------------------------------------------------ pruning

    def prune(self, obj: dict[str, Any]) -> list[str]:
        """Drops fields the schema does not know; returns their paths (e.g. "spec.foo")."""
        dropped: list[str] = []
        root = self.resolve(self.openapi)
        if root.get("x-kubernetes-preserve-unknown-fields") and not root.get("properties"):
            self._prune_metadata(obj, dropped)
            return dropped
        props = root.get("properties") or {}
        for key in list(obj):
            if key in _ROOT_FIELDS:
                continue
            sub = props.get(key)
            if sub is None:
                if not root.get("x-kubernetes-preserve-unknown-fields"):
                    del obj[key]
                    dropped.append(key)
                continue
            self._prune(sub, obj[key], key, dropped)
        self._prune_metadata(obj, dropped)
        return dropped

    def _prune_metadata(self, obj: dict[str, Any], dropped: list[str], path: str = "") -> None:
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            self._prune({"$ref": REF_PREFIX + OBJECT_META}, meta, _child(path, "metadata"), dropped)

    def _prune(self, schema: Schema, value: Any, path: str, dropped: list[str]) -> None:
        shape = self.resolve(schema)
        if isinstance(value, dict):
            if shape.get("x-kubernetes-embedded-resource"):
                self._prune_metadata(value, dropped, path)
            props = shape.get("properties")
            extra = shape.get("additionalProperties")
            preserve = bool(shape.get("x-kubernetes-preserve-unknown-fields"))
            embedded = bool(shape.get("x-kubernetes-embedded-resource"))
            if props is None and extra is None:
                return  # free-form object (e.g. RawExtension, JSON)
            for key in list(value):
                sub = (props or {}).get(key)
                if sub is None and isinstance(extra, dict):
                    sub = extra
                if sub is None:
                    if preserve or extra is True or (embedded and key in _ROOT_FIELDS):
                        continue
                    del value[key]
                    dropped.append(_child(path, key))
                    continue
                self._prune(sub, value[key], _child(path, key), dropped)
        elif isinstance(value, list):
            items = shape.get("items")
            if isinstance(items, dict):
                for i, item in enumerate(value):
                    self._prune(items, item, _index(path, i), dropped)

    # ------------------------------------------------------------------ defaulting

    def default(self, obj: dict[str, Any]) -> None:
        """Applies schema `default`s (and, for built-ins, the kind's defaulting function)."""
        if self.builtin:
            self._drop_nulls(self.openapi, obj)
        else:
            self._default(self.openapi, obj)
        if self.defaulter is not None:
            self.defaulter(obj)

    def _default(self, schema: Schema, value: Any) -> None:
        shape = self.resolve(schema)
        if isinstance(value, dict):
            props: dict[str, Schema] = shape.get("properties") or {}
            for key, sub in props.items():
                sub_shape = self.resolve(sub)
                has_default = "default" in sub or "default" in sub_shape
                default = sub.get("default", sub_shape.get("default"))
                if (
                    key in value
                    and value[key] is None
                    and not (sub.get("nullable") or sub_shape.get("nullable"))
                ):
                    if has_default:
                        value[key] = copy.deepcopy(default)
                    else:
                        del value[key]
                elif key not in value and has_default:
                    value[key] = copy.deepcopy(default)
                if key in value:
                    self._default(sub, value[key])
            extra = shape.get("additionalProperties")
            if isinstance(extra, dict):
                for key in list(value):
                    if key not in props:
                        self._default(extra, value[key])
        elif isinstance(value, list):
            items = shape.get("items")
            if isinstance(items, dict):
                for item in value:
                    self._default(items, item)

    def _drop_nulls(self, schema: Schema, value: Any) -> None:
        """Built-in objects pass through Go structs, where a JSON null is the zero value."""
        shape = self.resolve(schema)
        if isinstance(value, dict):
            props: dict[str, Schema] = shape.get("properties") or {}
            if not props:
                return
            for key in list(value):
                if value[key] is None and key in props:
                    del value[key]
                elif key in props:
                    self._drop_nulls(props[key], value[key])
        elif isinstance(value, list):
            items = shape.get("items")
            if isinstance(items, dict):
                for item in value:
                    self._drop_nulls(items, item)


def _type_cause(path: str, wanted: str, value: Any) -> Cause:
    got = json_type(value)
    return type_invalid(path, got, f"{path} in body must be of type {wanted}: {json.dumps(got)}")


def _go_json_kind(got: str) -> str:
    return {"integer": "number", "null": "null"}.get(got.strip('"'), got.strip('"'))


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.removeprefix(REF_PREFIX)
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


@cache
def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _search(pattern: str, value: str) -> bool:
    compiled = _compile(pattern)
    return compiled is None or compiled.search(value) is not None


_HOSTNAME = re.compile(
    r"^(?=.{1,255}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"
)
_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h|d|w))+$")


def _format_ok(fmt: str, value: str) -> bool:
    """The string formats kube keeps for custom resources that are cheap to check."""
    try:
        if fmt == "date-time":
            datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
            return "T" in value.upper() or " " in value
        if fmt == "date":
            datetime.date.fromisoformat(value)
            return True
        if fmt == "byte":
            base64.b64decode(value, validate=True)
            return True
        if fmt in ("uuid", "uuid3", "uuid4", "uuid5"):
            parsed = uuid.UUID(value)
            return fmt == "uuid" or parsed.version == int(fmt[-1])
        if fmt == "ipv4":
            ipaddress.IPv4Address(value)
            return True
        if fmt == "ipv6":
            ipaddress.IPv6Address(value)
            return True
        if fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
            return "/" in value
        if fmt == "hostname":
            return _HOSTNAME.match(value) is not None
        if fmt == "duration":
            return _DURATION.match(value) is not None
    except (ValueError, binascii.Error):
        return False
    return True


# ---------------------------------------------------------------------------- constructors


_builtin_cache: dict[tuple[str, str, str], TypeSchema] = {}


def builtin_schema(group: str, version: str, kind: str) -> TypeSchema:
    """The schema of a built-in kind; KeyError when the data file does not have it."""
    key = (group, version, kind)
    cached = _builtin_cache.get(key)
    if cached is not None:
        return cached
    name = _gvk_index()[key]
    from emulator.defaults import defaulter_for

    schema = TypeSchema(
        builtin_definitions()[name],
        definitions=builtin_definitions(),
        name=name,
        builtin=True,
        defaulter=defaulter_for(group, kind),
    )
    _builtin_cache[key] = schema
    return schema


def has_builtin_schema(group: str, version: str, kind: str) -> bool:
    return (group, version, kind) in _gvk_index()


def crd_component_name(group: str, version: str, kind: str) -> str:
    """kube-apiserver names a custom resource's OpenAPI component by the reversed group."""
    return ".".join([*reversed(group.split(".")), version, kind])


def crd_schema(crd: dict[str, Any], version: str) -> TypeSchema:
    """The schema of one version of a CustomResourceDefinition (v1)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group", ""))
    kind = str(names.get("kind", ""))
    raw: Schema | None = None
    for entry in spec.get("versions") or ():
        if entry.get("name") == version:
            raw = ((entry.get("schema") or {}).get("openAPIV3Schema")) or None
            break
    if raw is None:
        raw = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    root = copy.deepcopy(raw)
    # Published like kube-apiserver does: the type meta and ObjectMeta added to the root.
    props = root.setdefault("properties", {})
    type_meta = builtin_definitions()["io.k8s.api.core.v1.ConfigMap"]["properties"]
    for key in ("apiVersion", "kind"):
        props.setdefault(key, {"type": "string", "description": type_meta[key]["description"]})
    props["metadata"] = {
        "$ref": REF_PREFIX + OBJECT_META,
        "description": type_meta["metadata"]["description"],
    }
    root.setdefault("type", "object")
    root["x-kubernetes-group-version-kind"] = [{"group": group, "kind": kind, "version": version}]
    return TypeSchema(
        root,
        definitions=builtin_definitions(),
        name=crd_component_name(group, version, kind),
    )
