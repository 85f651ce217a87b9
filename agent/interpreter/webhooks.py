"""ResourceInterpreterWebhookConfigurations (config.karmada.io/v1alpha1): which webhook answers
which operation for which kind, the ResourceInterpreterContext request sent to it, and what its
response means. No I/O here: agent.sources.interpreter makes the calls.

As upstream: a webhook's rules match by API group, version and kind (each may be `*`) and by
operation; of the matching webhooks the first by "<configuration>/<webhook name>" answers.
The operations the agent asks are InterpretHealth (`response.healthy`), InterpretStatus
(ReflectStatus: `response.rawStatus`) and Retain (`response.patch` with `patchType:
JSONPatch`, a base64 JSON Patch on the desired object, or neither). The timeout defaults to 10
seconds. A webhook named by a Service is dialled at
`https://<service>.<namespace>.svc:<port><path>` (the member resolves that name; upstream first
looks the Service up on the control plane).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from agent.karmada.names import CONFIG_API_VERSION

Obj = dict[str, Any]

CONTEXT_KIND = "ResourceInterpreterContext"
SUPPORTED_CONTEXT_VERSIONS = ("v1alpha1",)
DEFAULT_TIMEOUT = 10.0

# The agent's operations and the webhook operation names for them.
WEBHOOK_OPERATIONS = {
    "InterpretHealth": "InterpretHealth",
    "ReflectStatus": "InterpretStatus",
    "Retain": "Retain",
}


class WebhookError(Exception):
    """The webhook's answer is unusable, or it refused the request."""


@dataclass(frozen=True)
class Rule:
    operations: tuple[str, ...]
    groups: tuple[str, ...]
    versions: tuple[str, ...]
    kinds: tuple[str, ...]

    def matches(self, group: str, version: str, kind: str, operation: str) -> bool:
        return (
            _has(self.operations, operation)
            and _has(self.groups, group)
            and _has(self.versions, version)
            and _has(self.kinds, kind)
        )


def _has(values: tuple[str, ...], value: str) -> bool:
    return "*" in values or value in values


@dataclass(frozen=True)
class Webhook:
    configuration: str
    name: str
    url: str
    ca_bundle: bytes | None
    timeout: float
    rules: tuple[Rule, ...]
    context_versions: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        return f'interpreter webhook "{self.name}" ({self.url})'


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _url(client_config: Obj) -> str | None:
    service = _dict(client_config.get("service"))
    if service.get("name") and service.get("namespace"):
        port = service.get("port") or 443
        path = str(service.get("path") or "")
        return f"https://{service['name']}.{service['namespace']}.svc:{port}{path}"
    url = client_config.get("url")
    return str(url) if isinstance(url, str) and url else None


def _ca_bundle(client_config: Obj) -> bytes | None:
    raw = client_config.get("caBundle")
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None


def parse_configuration(obj: Obj) -> list[Webhook]:
    name = str(_dict(obj.get("metadata")).get("name") or "")
    hooks: list[Webhook] = []
    for raw in obj.get("webhooks") or []:
        hook = _dict(raw)
        client_config = _dict(hook.get("clientConfig"))
        url = _url(client_config)
        if url is None:
            continue
        timeout = hook.get("timeoutSeconds")
        rules = tuple(
            Rule(
                _strings(r.get("operations")),
                _strings(r.get("apiGroups")),
                _strings(r.get("apiVersions")),
                _strings(r.get("kinds")),
            )
            for r in map(_dict, hook.get("rules") or [])
        )
        hooks.append(
            Webhook(
                configuration=name,
                name=str(hook.get("name") or ""),
                url=url,
                ca_bundle=_ca_bundle(client_config),
                timeout=float(timeout)
                if isinstance(timeout, int) and timeout > 0
                else DEFAULT_TIMEOUT,
                rules=rules,
                context_versions=_strings(hook.get("interpreterContextVersions")),
            )
        )
    return hooks


class WebhookSet:
    """The webhooks of every configuration; the first match answers."""

    def __init__(self) -> None:
        self._configurations: dict[str, list[Webhook]] = {}

    def put(self, obj: Obj) -> None:
        name = str(_dict(obj.get("metadata")).get("name") or "")
        self._configurations[name] = parse_configuration(obj)

    def remove(self, obj: Obj) -> None:
        self._configurations.pop(str(_dict(obj.get("metadata")).get("name") or ""), None)

    def match(self, api_version: str, kind: str, operation: str) -> Webhook | None:
        webhook_operation = WEBHOOK_OPERATIONS.get(operation)
        if webhook_operation is None:
            return None
        group, _, version = api_version.rpartition("/")
        relevant = [
            hook
            for hooks in self._configurations.values()
            for hook in hooks
            if any(r.matches(group, version, kind, webhook_operation) for r in hook.rules)
        ]
        # As upstream: the first by "<configuration>/<webhook>".
        return min(relevant, key=lambda h: f"{h.configuration}/{h.name}", default=None)


def request(webhook: Webhook, operation: str, uid: str, obj: Obj, observed: Obj | None) -> Obj:
    """The ResourceInterpreterContext sent for `operation` on `obj`."""
    if webhook.context_versions and not any(
        v in SUPPORTED_CONTEXT_VERSIONS for v in webhook.context_versions
    ):
        raise WebhookError(
            f"{webhook.describe()} accepts none of the ResourceInterpreterContext versions "
            f"{', '.join(SUPPORTED_CONTEXT_VERSIONS)}"
        )
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    meta = _dict(obj.get("metadata"))
    body: Obj = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": str(obj.get("kind") or "")},
        "name": str(meta.get("name") or ""),
        "operation": WEBHOOK_OPERATIONS[operation],
        "object": obj,
        # Upstream always sends the (here unused) desired replica count.
        "replicas": 0,
    }
    if meta.get("namespace"):
        body["namespace"] = meta["namespace"]
    if observed is not None:
        body["observedObject"] = observed
    return {"apiVersion": CONFIG_API_VERSION, "kind": CONTEXT_KIND, "request": body}


def _response(webhook: Webhook, uid: str, answer: Any) -> Obj:
    response = _dict(_dict(answer).get("response"))
    if not response:
        raise WebhookError(f"{webhook.describe()} answered without a response")
    if response.get("uid") != uid:
        raise WebhookError(f"{webhook.describe()} answered for another request (uid mismatch)")
    if response.get("successful") is not True:
        status = _dict(response.get("status"))
        message = status.get("message") or "no reason given"
        code = f" (code {status['code']})" if status.get("code") else ""
        raise WebhookError(f"{webhook.describe()} refused: {message}{code}")
    return response


def health(webhook: Webhook, uid: str, answer: Any) -> bool:
    healthy = _response(webhook, uid, answer).get("healthy")
    if not isinstance(healthy, bool):
        raise WebhookError(f"{webhook.describe()} answered InterpretHealth without `healthy`")
    return healthy


def status(webhook: Webhook, uid: str, answer: Any) -> Obj:
    raw = _response(webhook, uid, answer).get("rawStatus")
    if raw is None:
        raise WebhookError(f"{webhook.describe()} answered InterpretStatus without `rawStatus`")
    if not isinstance(raw, dict):
        raise WebhookError(f"{webhook.describe()} answered a rawStatus that is not an object")
    return raw


def retained(webhook: Webhook, uid: str, answer: Any, desired: Obj) -> Obj:
    response = _response(webhook, uid, answer)
    encoded, patch_type = response.get("patch"), response.get("patchType")
    if not encoded and patch_type is None:
        return desired
    if patch_type != "JSONPatch" or not encoded:
        raise WebhookError(
            f"{webhook.describe()} answered a patch {'of type ' + repr(patch_type) if encoded else 'that is empty'}; "
            "only a JSONPatch is understood"
        )
    try:
        operations = json.loads(base64.b64decode(str(encoded), validate=True))
        if not isinstance(operations, list):  # jsonpatch would take a string for JSON text
            raise ValueError("a JSON patch is a list of operations")
        out = jsonpatch.apply_patch(desired, operations)  # applied to a copy
    except (ValueError, jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise WebhookError(f"{webhook.describe()} answered an unusable patch: {exc}") from None
    if not isinstance(out, dict):
        raise WebhookError(f"{webhook.describe()} patched the object into a non-object")
    return out
