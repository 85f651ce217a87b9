"""admissionregistration.k8s.io/v1 Mutating- and ValidatingWebhookConfiguration: their resource
types, the defaults kube-apiserver fills in, and the checks it makes when they are written.

The checks are the ones a configuration author meets first (names, the v1-required fields,
the enumerations, clientConfig, rule shapes, the timeout range), with kube's messages.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from .errors import field_cause
from .registry import JSON, Cause, ResourceType
from .validation import label_causes, name_problems, qualified_name_problems
from .wire import UserInfo

GROUP = "admissionregistration.k8s.io"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
REVIEW_VERSIONS = ("v1", "v1beta1")
OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SIDE_EFFECTS = ("None", "NoneOnDryRun")


def _supported(field: str, value: Any, allowed: tuple[str, ...]) -> Cause:
    listed = ", ".join(f'"{a}"' for a in allowed)
    return field_cause(
        "FieldValueNotSupported", field,
        f"Unsupported value: {json.dumps(value)}: supported values: {listed}",
    )  # fmt: skip


def _required(field: str, detail: str = "") -> Cause:
    return field_cause(
        "FieldValueRequired", field, "Required value" + (f": {detail}" if detail else "")
    )


def _invalid(field: str, value: Any, detail: str) -> Cause:
    shown = json.dumps(value) if isinstance(value, str) else str(value)
    return field_cause("FieldValueInvalid", field, f"Invalid value: {shown}: {detail}")


def _hooks(obj: JSON) -> list[JSON]:
    hooks = obj.get("webhooks")
    return [h for h in hooks if isinstance(h, dict)] if isinstance(hooks, list) else []


def default_webhooks(obj: JSON, mutating: bool) -> None:
    """admissionregistration/v1's defaults for every webhook of a configuration."""
    for hook in _hooks(obj):
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", 10)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)


def _url_causes(field: str, url: Any) -> list[Cause]:
    if not isinstance(url, str):
        return [_invalid(field, url, "host must be specified")]
    parts = urlsplit(url)
    causes: list[Cause] = []
    if parts.scheme != "https":
        causes.append(_invalid(field, url, "'https' is the only allowed URL scheme"))
    if not parts.hostname:
        causes.append(_invalid(field, url, "host must be specified"))
    if parts.username:
        causes.append(
            _invalid(field, parts.username, "user information is not permitted in the URL")
        )
    if parts.fragment:
        causes.append(_invalid(field, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        causes.append(_invalid(field, parts.query, "query parameters are not permitted in the URL"))
    return causes


def _service_causes(field: str, service: JSON) -> list[Cause]:
    causes: list[Cause] = []
    if not service.get("namespace"):
        causes.append(_required(f"{field}.namespace", "service namespace is required"))
    if not service.get("name"):
        causes.append(_required(f"{field}.name", "service name is required"))
    path = service.get("path")
    if path is not None:
        if not isinstance(path, str) or not path.startswith("/"):
            causes.append(_invalid(f"{field}.path", path, "must start with a '/'"))
        elif path != "/":
            for i, segment in enumerate(path[1:].rstrip("/").split("/")):
                if not segment:
                    causes.append(_invalid(f"{field}.path", path, f"segment[{i}] may not be empty"))
                    break
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append(
            _invalid(
                f"{field}.port", port, "port is not valid: must be between 1 and 65535, inclusive"
            )
        )
    return causes


def _go_strings(values: list[Any]) -> str:
    return "[]string{" + ", ".join(json.dumps(v) for v in values) + "}"


def _selector_causes(field: str, selector: Any) -> list[Cause]:
    """A metav1.LabelSelector's checks (ValidateLabelSelector)."""
    if not isinstance(selector, dict):
        return []
    causes = label_causes(f"{field}.matchLabels", selector.get("matchLabels") or {})
    for i, expr in enumerate(selector.get("matchExpressions") or ()):
        where = f"{field}.matchExpressions[{i}]"
        operator, values = expr.get("operator"), expr.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(
                    _required(f"{where}.values",
                              "must be specified when `operator` is 'In' or 'NotIn'")
                )  # fmt: skip
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(
                    field_cause("FieldValueForbidden", f"{where}.values",
                                "Forbidden: may not be specified when `operator` is 'Exists' or "
                                "'DoesNotExist'")
                )  # fmt: skip
        else:
            causes.append(_invalid(f"{where}.operator", operator, "not a valid selector operator"))
        key = str(expr.get("key") or "")
        causes.extend(_invalid(f"{where}.key", key, p) for p in qualified_name_problems(key))
    return causes


def _resource_causes(field: str, resources: list[Any]) -> list[Cause]:
    """A wildcard may not be followed by what it already covers."""
    causes: list[Cause] = []
    any_sub: set[str] = set()  # "pods/*" seen
    any_res: set[str] = set()  # "*/status" seen
    for i, entry in enumerate(resources):
        res, slash, sub = str(entry).partition("/")
        if not slash:
            continue
        for seen, key, wildcard in ((any_sub, res, f"{res}/*"), (any_res, sub, f"*/{sub}")):
            if key in seen:
                causes.append(
                    _invalid(f"{field}[{i}]", entry,
                             f"if '{wildcard}' is present, must not specify {entry}")
                )  # fmt: skip
        if sub == "*":
            any_sub.add(res)
        if res == "*":
            any_res.add(sub)
    shown = _go_strings(resources)
    if "*/*" in resources and len(resources) > 1:
        causes.append(
            field_cause("FieldValueInvalid", field,
                        f"Invalid value: {shown}: if '*/*' is present, must not specify other "
                        "resources")
        )  # fmt: skip
    if "*" in resources and any("/" not in str(r) and r != "*" for r in resources):
        causes.append(
            field_cause("FieldValueInvalid", field,
                        f"Invalid value: {shown}: if '*' is present, must not specify other "
                        "resources without subresources")
        )  # fmt: skip
    return causes


def _rule_causes(field: str, rule: JSON) -> list[Cause]:
    causes: list[Cause] = []
    operations = rule.get("operations")
    if not operations:
        causes.append(_required(f"{field}.operations"))
    else:
        if "*" in operations and len(operations) > 1:
            causes.append(
                _invalid(f"{field}.operations", operations,
                         "if '*' is present, must not specify other operations")
            )  # fmt: skip
        for i, op in enumerate(operations):
            if op not in OPERATIONS:
                causes.append(_supported(f"{field}.operations[{i}]", op, OPERATIONS))
    for key in ("apiGroups", "apiVersions", "resources"):
        if not rule.get(key):
            causes.append(_required(f"{field}.{key}"))
    causes.extend(_resource_causes(f"{field}.resources", rule.get("resources") or []))
    scope = rule.get("scope", "*")
    if scope not in ("*", "Cluster", "Namespaced"):
        causes.append(_supported(f"{field}.scope", scope, ("*", "Cluster", "Namespaced")))
    return causes


def _hook_causes(field: str, hook: JSON, mutating: bool) -> list[Cause]:
    causes: list[Cause] = []
    name = hook.get("name")
    if not name:
        causes.append(_required(f"{field}.name"))
    else:
        problems = name_problems(str(name), "subdomain")
        if str(name).count(".") < 2:
            problems.append("should be a domain with at least three segments separated by dots")
        causes.extend(_invalid(f"{field}.name", name, p) for p in problems)
    for i, rule in enumerate(hook.get("rules") or ()):
        if isinstance(rule, dict):
            causes.extend(_rule_causes(f"{field}.rules[{i}]", rule))
    versions = hook.get("admissionReviewVersions")
    if not versions:
        causes.append(
            _required(f"{field}.admissionReviewVersions", "must specify one of v1, v1beta1")
        )
    elif not any(v in REVIEW_VERSIONS for v in versions):
        shown = "[]string{" + ", ".join(json.dumps(v) for v in versions) + "}"
        causes.append(
            field_cause(
                "FieldValueInvalid", f"{field}.admissionReviewVersions",
                f"Invalid value: {shown}: must include at least one of v1, v1beta1",
            )
        )  # fmt: skip
    for key in ("namespaceSelector", "objectSelector"):
        causes.extend(_selector_causes(f"{field}.{key}", hook.get(key)))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        causes.append(_required(f"{field}.sideEffects", "must specify one of None, NoneOnDryRun"))
    elif side_effects not in SIDE_EFFECTS:
        causes.append(_supported(f"{field}.sideEffects", side_effects, SIDE_EFFECTS))
    for key, allowed in (
        ("failurePolicy", ("Fail", "Ignore")),
        ("matchPolicy", ("Equivalent", "Exact")),
        *((("reinvocationPolicy", ("IfNeeded", "Never")),) if mutating else ()),
    ):
        value = hook.get(key)
        if value is not None and value not in allowed:
            causes.append(_supported(f"{field}.{key}", value, allowed))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 30):
        causes.append(
            _invalid(f"{field}.timeoutSeconds", timeout,
                     "the timeout value must be between 1 and 30 seconds")
        )  # fmt: skip
    config = hook.get("clientConfig") or {}
    has_url, has_service = config.get("url") is not None, config.get("service") is not None
    if has_url == has_service:
        causes.append(
            _required(f"{field}.clientConfig", "exactly one of url or service is required")
        )
    elif has_url:
        causes.extend(_url_causes(f"{field}.clientConfig.url", config["url"]))
    elif isinstance(config["service"], dict):
        causes.extend(_service_causes(f"{field}.clientConfig.service", config["service"]))
    return causes


def validate_configuration(obj: JSON, mutating: bool) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, hook in enumerate(_hooks(obj)):
        field = f"webhooks[{i}]"
        causes.extend(_hook_causes(field, hook, mutating))
        name = hook.get("name")
        if name:
            if name in seen:
                causes.append(field_cause("FieldValueDuplicate", f"{field}.name",
                                          f"Duplicate value: {json.dumps(name)}"))  # fmt: skip
            seen.add(name)
    return causes


def _type(resource: str, kind: str, mutating: bool) -> ResourceType:
    def prepare_create(obj: JSON, user: UserInfo | None) -> None:
        default_webhooks(obj, mutating)

    def prepare_update(new: JSON, old: JSON) -> None:
        default_webhooks(new, mutating)

    def validate(new: JSON, old: JSON | None) -> list[Cause]:
        return validate_configuration(new, mutating)

    return ResourceType(
        GROUP, "v1", resource, kind, False, categories=("api-extensions",),
        tracks_generation=True, prepare_create=prepare_create, prepare_update=prepare_update,
        validate=validate,
    )  # fmt: skip


def webhook_configuration_types() -> list[ResourceType]:
    return [
        _type(MUTATING, "MutatingWebhookConfiguration", True),
        _type(VALIDATING, "ValidatingWebhookConfiguration", False),
    ]
