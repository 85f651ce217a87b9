"""Admission webhooks: kube-apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook.

The write handlers call `mutate` on the decoded object before the type's own preparation and
validation, and `validate` on the finished object just before it is stored (DELETE: on the
stored object). Webhooks come from the stored configurations, configurations in name order and
webhooks in their order; mutating webhooks run one after the other (once more, for those with
reinvocationPolicy IfNeeded, when a later one changed the object), validating webhooks run
concurrently. Webhook configurations themselves are never sent to webhooks, as in kube.

Not (yet) as kube: `matchConditions` (CEL) are not evaluated (a webhook is called as if they
held); fields a mutating webhook adds are counted in managedFields to the request's manager;
reviews, custom subresources (serviceaccounts/token) and the emulator's in-process
controllers (garbage collector, namespace cleanup) write without admission.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import uuid
from dataclasses import dataclass, field

from . import errors
from .errors import ApiError
from .patch import apply_json_patch
from .registry import JSON, Registry, ResourceType
from .selectors import LabelSelector, selector_from_label_selector
from .storage import Storage
from .webhook_call import Answer, CallingError, WebhookClient
from .webhook_config import GROUP, MUTATING, VALIDATING
from .wire import UserInfo

log = logging.getLogger(__name__)

_EXEMPT = frozenset(
    (GROUP, r)
    for r in (
        MUTATING, VALIDATING, "validatingadmissionpolicies", "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies", "mutatingadmissionpolicybindings",
    )
)  # fmt: skip
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


@dataclass
class Request:
    """The attributes of one write, as admission sees them."""

    rt: ResourceType
    operation: str  # CREATE, UPDATE or DELETE
    namespace: str
    name: str
    subresource: str = ""
    user: UserInfo | None = None
    dry_run: bool = False
    options: JSON = field(default_factory=dict)
    # Where the webhooks' warnings go (the response's Warning headers).
    warnings: list[str] = field(default_factory=list)
    # The objects' own kind where it is not the resource's (autoscaling/v1 Scale for /scale).
    kind: JSON | None = None

    def __post_init__(self) -> None:
        # A Namespace's own requests carry its name as their namespace.
        if self.rt.group_resource == ("", "namespaces") and not self.namespace:
            self.namespace = self.name


@dataclass
class _Invocation:
    config: str
    hook: JSON
    rt: ResourceType  # the version the webhook is sent (matchPolicy Equivalent may convert)


def _labels(obj: JSON | None) -> dict[str, str] | None:
    if obj is None:
        return None
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _selector(hook: JSON, key: str) -> LabelSelector:
    try:
        return selector_from_label_selector(hook.get(key))
    except (ApiError, KeyError, TypeError) as exc:
        raise errors.internal(str(exc)) from exc


def _split(resource: str) -> tuple[str, str]:
    main, _, sub = resource.partition("/")
    return main, sub


def rule_matches(rule: JSON, req: Request, rt: ResourceType) -> bool:
    """One of a webhook's rules against a request on (a version of) a resource."""
    ops = rule.get("operations") or ()
    if "*" not in ops and req.operation not in ops:
        return False
    groups = rule.get("apiGroups") or ()
    if "*" not in groups and rt.group not in groups:
        return False
    versions = rule.get("apiVersions") or ()
    if "*" not in versions and rt.version not in versions:
        return False
    scope = rule.get("scope") or "*"
    is_ns = rt.group_resource == ("", "namespaces")
    if scope == "Namespaced" and (is_ns or not req.namespace):
        return False
    if scope == "Cluster" and not (is_ns or not req.namespace):
        return False
    for entry in rule.get("resources") or ():
        res, sub = _split(entry)
        if res in ("*", rt.resource) and sub in ("*", req.subresource):
            return True
    return False


def _sent(obj: JSON | None, rt: ResourceType, req: Request) -> JSON | None:
    """The object as the webhook is sent it: in the version it asked for."""
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    if req.kind is None:
        out["apiVersion"] = rt.api_version
        out["kind"] = rt.kind
    return out


def _gvk(rt: ResourceType) -> JSON:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _gvr(rt: ResourceType) -> JSON:
    return {"group": rt.group, "version": rt.version, "resource": rt.resource}


def denied(webhook: str, result: JSON | None) -> ApiError:
    """The error a webhook's refusal becomes (kube's ToStatusErr)."""
    result = dict(result or {})
    code = result.get("code")
    if not isinstance(code, int) or code < 400:
        code = 400
    by = f'admission webhook "{webhook}" denied the request'
    if result.get("message"):
        message = f"{by}: {result['message']}"
    elif result.get("reason"):
        message = f"{by}: {result['reason']}"
    else:
        message = f"{by} without explanation"
    details = result.get("details")
    return ApiError(
        code,
        str(result.get("reason") or ""),
        message,
        details if isinstance(details, dict) else None,
    )


def dry_run_unsupported(webhook: str) -> ApiError:
    return errors.bad_request(f'admission webhook "{webhook}" does not support dry run')


class WebhookAdmission:
    def __init__(
        self, registry: Registry, storage: Storage, client: WebhookClient | None = None
    ) -> None:
        self.registry = registry
        self.storage = storage
        self.client = client or WebhookClient()

    def applies(self, rt: ResourceType) -> bool:
        """Whether any configuration exists that could see a write of this type."""
        if rt.group_resource in _EXEMPT:
            return False
        return bool(
            self.storage.count((GROUP, MUTATING)) or self.storage.count((GROUP, VALIDATING))
        )

    def _hooks(self, resource: str) -> list[tuple[str, JSON]]:
        out = []
        for config in self.storage.list((GROUP, resource)):
            for hook in config.get("webhooks") or ():
                out.append((config["metadata"]["name"], hook))
        return out

    # ------------------------------------------------------------------ matching

    def _namespace_labels(self, req: Request, obj: JSON | None) -> dict[str, str]:
        if req.rt.group_resource == ("", "namespaces") and not req.subresource and obj is not None:
            return _labels(obj) or {}
        ns = self.storage.get(("", "namespaces"), "", req.namespace)
        if ns is None:
            raise errors.not_found("", "namespaces", req.namespace)
        return _labels(ns) or {}

    def _equivalents(self, rt: ResourceType) -> list[ResourceType]:
        return [
            other
            for other in self.registry.all()
            if other.group_resource == rt.group_resource and other.version != rt.version
        ]

    def _match(
        self, config: str, hook: JSON, req: Request, obj: JSON | None, old: JSON | None
    ) -> _Invocation | None:
        ns_error: ApiError | None = None
        ns_selector = _selector(hook, "namespaceSelector")
        is_ns = req.rt.group_resource == ("", "namespaces")
        if (req.namespace or is_ns) and not ns_selector.empty():
            try:
                if not ns_selector.matches(self._namespace_labels(req, obj)):
                    return None
            except ApiError as exc:
                ns_error = exc
        obj_selector = _selector(hook, "objectSelector")
        if not obj_selector.empty():
            seen = [labels for labels in (_labels(obj), _labels(old)) if labels is not None]
            if not any(obj_selector.matches(labels) for labels in seen):
                return None
        rules = [r for r in hook.get("rules") or () if isinstance(r, dict)]
        target: ResourceType | None = None
        if any(rule_matches(r, req, req.rt) for r in rules):
            target = req.rt
        elif hook.get("matchPolicy", "Equivalent") == "Equivalent":
            target = next(
                (e for r in rules for e in self._equivalents(req.rt) if rule_matches(r, req, e)),
                None,
            )
        if target is None:
            return None
        if ns_error is not None:
            raise ns_error
        return _Invocation(config, hook, target)

    # ------------------------------------------------------------------ calling

    def _review(self, inv: _Invocation, req: Request, obj: JSON | None, old: JSON | None) -> JSON:
        user: JSON = {}
        if req.user is not None:
            user = {k: v for k, v in req.user.to_dict().items() if v}
        options = {
            "kind": _OPTIONS_KIND[req.operation], "apiVersion": "meta.k8s.io/v1", **req.options
        }  # fmt: skip
        return {
            "uid": str(uuid.uuid4()),
            "kind": req.kind or _gvk(inv.rt),
            "resource": _gvr(inv.rt),
            **({"subResource": req.subresource} if req.subresource else {}),
            "requestKind": req.kind or _gvk(req.rt),
            "requestResource": _gvr(req.rt),
            **({"requestSubResource": req.subresource} if req.subresource else {}),
            **({"name": req.name} if req.name else {}),
            **({"namespace": req.namespace} if req.namespace else {}),
            "operation": req.operation,
            "userInfo": user,
            "object": _sent(obj, inv.rt, req),
            "oldObject": _sent(old, inv.rt, req),
            "dryRun": req.dry_run,
            "options": options,
        }

    async def _call(
        self, inv: _Invocation, req: Request, obj: JSON | None, old: JSON | None, mutating: bool
    ) -> Answer:
        name = str(inv.hook.get("name"))
        if req.dry_run and inv.hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise dry_run_unsupported(name)
        answer = await self.client.call(
            inv.hook, self._review(inv, req, obj, old), mutating=mutating
        )
        # The response's warnings, each once, as kube's warning recorder keeps them.
        req.warnings.extend(w for w in dict.fromkeys(answer.warnings) if w not in req.warnings)
        if not answer.allowed:
            raise denied(name, answer.result)
        return answer

    def _failed(self, inv: _Invocation, exc: CallingError) -> None:
        """A call that failed: refused with failurePolicy Fail, let through with Ignore."""
        if inv.hook.get("failurePolicy", "Fail") == "Ignore":
            log.warning("Failed calling webhook, failing open %s: %s", inv.hook.get("name"), exc)
            return
        raise errors.internal(str(exc)) from exc

    def _patched(
        self, inv: _Invocation, req: Request, obj: JSON | None, answer: Answer
    ) -> JSON | None:
        name = str(inv.hook.get("name"))
        if not answer.patch:
            return None
        try:
            ops = json.loads(answer.patch)
        except ValueError as exc:
            raise CallingError(
                name, f"received undecodable patch in webhook response: {exc}"
            ) from exc
        if not ops:
            return None
        if obj is None:
            raise errors.internal(
                f'admission webhook "{name}" attempted to modify the object, which is not '
                "supported for this operation"
            )
        if answer.patch_type != "JSONPatch":
            raise CallingError(name, f'unsupported patch type "{answer.patch_type}"')
        sent = _sent(obj, inv.rt, req)
        assert sent is not None
        try:
            patched = apply_json_patch(sent, ops)
        except ApiError as exc:
            raise errors.internal(exc.message) from exc
        patched["apiVersion"], patched["kind"] = obj.get("apiVersion"), obj.get("kind")
        return patched

    async def mutate(
        self, req: Request, obj: JSON | None, old: JSON | None
    ) -> tuple[JSON | None, bool]:
        """Run the mutating webhooks; returns the object and whether any of them changed it."""
        hooks = self._hooks(MUTATING)
        changed_any = False
        reinvocable: set[tuple[str, str]] = set()
        to_reinvoke: set[tuple[str, str]] = set()
        for round_ in (0, 1):
            changed_round = False
            for config, hook in hooks:
                key = (config, str(hook.get("name")))
                if round_ == 1 and key not in to_reinvoke:
                    continue
                inv = self._match(config, hook, req, obj, old)
                if inv is None:
                    continue
                try:
                    answer = await self._call(inv, req, obj, old, mutating=True)
                    patched = self._patched(inv, req, obj, answer)
                except CallingError as exc:
                    self._failed(inv, exc)
                    patched = None
                if patched is not None and patched != obj:
                    obj = patched
                    changed_any = changed_round = True
                    to_reinvoke |= reinvocable
                if hook.get("reinvocationPolicy") == "IfNeeded":
                    reinvocable.add(key)
            if not changed_round:
                break
        return obj, changed_any

    async def validate(self, req: Request, obj: JSON | None, old: JSON | None) -> None:
        """Run the validating webhooks concurrently; the first refusal (in order) is raised."""
        invocations = [
            inv
            for config, hook in self._hooks(VALIDATING)
            if (inv := self._match(config, hook, req, obj, old)) is not None
        ]
        if not invocations:
            return
        results = await asyncio.gather(
            *(self._call(inv, req, obj, old, mutating=False) for inv in invocations),
            return_exceptions=True,
        )
        for inv, result in zip(invocations, results, strict=True):
            if isinstance(result, CallingError):
                self._failed(inv, result)
            elif isinstance(result, BaseException):
                raise result


__all__ = ["Request", "WebhookAdmission", "denied", "rule_matches"]
