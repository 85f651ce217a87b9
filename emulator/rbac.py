"""RBAC authorization, evaluated like kube-apiserver's RBAC authorizer.

Rules come from ClusterRoleBindings (everywhere) and RoleBindings (in their own
namespace only), resolved to the Role or ClusterRole they reference. Matching of
verbs, API groups, resources (with "resource/subresource", "*/subresource" and
"*"), resource names and non-resource URLs (with a trailing "*") follows
rbac/v1 evaluation helpers. Members of system:masters are always allowed, as by
kube-apiserver's privileged-group authorizer in front of RBAC.

The authorizer indexes bindings by subject and caches decisions; both are rebuilt
whenever the source reports a new revision.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import ApiError
from .requestinfo import RequestAttributes
from .wire import UserInfo

RBAC_GROUP = "rbac.authorization.k8s.io"
PRIVILEGED_GROUP = "system:masters"
_SA_PREFIX = "system:serviceaccount:"
_DECISION_CACHE_LIMIT = 10_000


class RbacSource(Protocol):
    """Where the RBAC objects live (the emulator's storage, or a static set in tests)."""

    def revision(self) -> int:
        """Any number that changes whenever a Role, ClusterRole or binding changes."""
        ...

    def list(self, group: str, resource: str, namespace: str | None) -> list[dict[str, Any]]:
        """Objects of group/resource in `namespace`, or in all namespaces for None."""
        ...


@dataclass(frozen=True)
class RulesResult:
    """What SelfSubjectRulesReview reports: rules as ResourceRule/NonResourceRule dicts."""

    resource_rules: list[dict[str, Any]]
    non_resource_rules: list[dict[str, Any]]
    incomplete: bool = False
    evaluation_error: str = ""


class Authorizer(Protocol):
    def authorize(self, user: UserInfo, attrs: RequestAttributes) -> tuple[bool, str]: ...

    def rules_for(self, user: UserInfo, namespace: str) -> RulesResult: ...


class AlwaysAllow:
    """Authorization switched off (kube's --authorization-mode=AlwaysAllow)."""

    def authorize(self, user: UserInfo, attrs: RequestAttributes) -> tuple[bool, str]:
        return True, ""

    def rules_for(self, user: UserInfo, namespace: str) -> RulesResult:
        return RulesResult(
            [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        )


def _quote(text: str) -> str:
    """Go's %q for the strings that appear in RBAC reasons."""
    return json.dumps(text, ensure_ascii=False)


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))


@dataclass(frozen=True)
class _Rule:
    verbs: frozenset[str]
    groups: frozenset[str]
    resources: tuple[str, ...]
    names: frozenset[str]
    urls: tuple[str, ...]
    raw: dict[str, Any]

    @classmethod
    def parse(cls, rule: dict[str, Any]) -> _Rule:
        return cls(
            frozenset(_strings(rule.get("verbs"))),
            frozenset(_strings(rule.get("apiGroups"))),
            _strings(rule.get("resources")),
            frozenset(_strings(rule.get("resourceNames"))),
            _strings(rule.get("nonResourceURLs")),
            rule,
        )

    def allows(self, attrs: RequestAttributes) -> bool:
        if "*" not in self.verbs and attrs.verb not in self.verbs:
            return False
        if not attrs.is_resource_request:
            return self._url_matches(attrs.path)
        if "*" not in self.groups and attrs.api_group not in self.groups:
            return False
        if not self._resource_matches(attrs.resource, attrs.subresource):
            return False
        return not self.names or attrs.name in self.names

    def _resource_matches(self, resource: str, subresource: str) -> bool:
        combined = f"{resource}/{subresource}" if subresource else resource
        for r in self.resources:
            if r == "*" or r == combined:
                return True
            if subresource and r == "*/" + subresource:
                return True
        return False

    def _url_matches(self, path: str) -> bool:
        for url in self.urls:
            if url == "*" or url == path:
                return True
            if url.endswith("*") and path.startswith(url.rstrip("*")):
                return True
        return False


@dataclass(frozen=True)
class _Binding:
    kind: str  # ClusterRoleBinding or RoleBinding
    name: str
    namespace: str
    role_kind: str
    role_name: str
    subjects: tuple[dict[str, Any], ...]

    @classmethod
    def parse(cls, kind: str, obj: dict[str, Any]) -> _Binding:
        meta = obj.get("metadata") or {}
        ref = obj.get("roleRef") or {}
        subjects = tuple(s for s in obj.get("subjects") or () if isinstance(s, dict))
        return cls(
            kind,
            str(meta.get("name", "")),
            str(meta.get("namespace", "") or ""),
            str(ref.get("kind", "")),
            str(ref.get("name", "")),
            subjects,
        )

    def subject_keys(self) -> Iterable[str]:
        """Index keys of the identities this binding names."""
        for s in self.subjects:
            kind, name = s.get("kind"), s.get("name", "")
            if kind == "User":
                yield "u:" + name
            elif kind == "Group":
                yield "g:" + name
            elif kind == "ServiceAccount":
                ns = s.get("namespace") or self.namespace
                if ns:
                    yield f"u:{_SA_PREFIX}{ns}:{name}"

    def first_subject(self, user: UserInfo) -> dict[str, Any] | None:
        for s in self.subjects:
            kind, name = s.get("kind"), s.get("name", "")
            if kind == "User" and user.name == name:
                return s
            if kind == "Group" and name in user.groups:
                return s
            if kind == "ServiceAccount":
                ns = s.get("namespace") or self.namespace
                if ns and user.name == f"{_SA_PREFIX}{ns}:{name}":
                    return s
        return None

    def describe(self, subject: dict[str, Any]) -> str:
        kind, name = subject.get("kind", ""), subject.get("name", "")
        if kind == "ServiceAccount":
            who = f"{kind} {_quote(name + '/' + (subject.get('namespace') or self.namespace))}"
        else:
            who = f"{kind} {_quote(name)}"
        binding = (
            self.name if self.kind == "ClusterRoleBinding" else f"{self.name}/{self.namespace}"
        )
        return (
            f"{self.kind} {_quote(binding)} of {self.role_kind} {_quote(self.role_name)} to {who}"
        )


@dataclass
class _Index:
    revision: int
    cluster_roles: dict[str, tuple[_Rule, ...]]
    roles: dict[tuple[str, str], tuple[_Rule, ...]]
    cluster_bindings: list[_Binding]
    cluster_by_subject: dict[str, list[int]]
    bindings: dict[str, list[_Binding]]
    by_subject: dict[str, dict[str, list[int]]]
    decisions: dict[tuple[Any, ...], tuple[bool, str]] = field(default_factory=dict)


def _rules(obj: dict[str, Any]) -> tuple[_Rule, ...]:
    return tuple(_Rule.parse(r) for r in obj.get("rules") or () if isinstance(r, dict))


def _index_subjects(bindings: Sequence[_Binding]) -> dict[str, list[int]]:
    index: dict[str, list[int]] = {}
    for i, binding in enumerate(bindings):
        for key in set(binding.subject_keys()):
            index.setdefault(key, []).append(i)
    return index


def _build_index(source: RbacSource, revision: int) -> _Index:
    cluster_roles = {
        str((o.get("metadata") or {}).get("name", "")): _rules(o)
        for o in source.list(RBAC_GROUP, "clusterroles", None)
    }
    roles: dict[tuple[str, str], tuple[_Rule, ...]] = {}
    for o in source.list(RBAC_GROUP, "roles", None):
        meta = o.get("metadata") or {}
        roles[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = _rules(o)
    cluster_bindings = sorted(
        (
            _Binding.parse("ClusterRoleBinding", o)
            for o in source.list(RBAC_GROUP, "clusterrolebindings", None)
        ),
        key=lambda b: b.name,
    )
    bindings: dict[str, list[_Binding]] = {}
    for o in source.list(RBAC_GROUP, "rolebindings", None):
        b = _Binding.parse("RoleBinding", o)
        bindings.setdefault(b.namespace, []).append(b)
    for ns_bindings in bindings.values():
        ns_bindings.sort(key=lambda b: b.name)
    return _Index(
        revision,
        cluster_roles,
        roles,
        cluster_bindings,
        _index_subjects(cluster_bindings),
        bindings,
        {ns: _index_subjects(bs) for ns, bs in bindings.items()},
    )


def _subject_keys(user: UserInfo) -> list[str]:
    return ["u:" + user.name, *("g:" + g for g in user.groups)]


def _aggregate(problems: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several de-duplicated in []."""
    unique = list(dict.fromkeys(problems))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


class RbacAuthorizer:
    def __init__(self, source: RbacSource) -> None:
        self.source = source
        self._index: _Index | None = None

    def _current(self) -> _Index:
        revision = self.source.revision()
        index = self._index
        if index is None or index.revision != revision:
            index = self._index = _build_index(self.source, revision)
        return index

    def _applicable(self, index: _Index, user: UserInfo, namespace: str) -> list[_Binding]:
        keys = _subject_keys(user)
        found: list[_Binding] = []
        hits = sorted({i for k in keys for i in index.cluster_by_subject.get(k, ())})
        found += [index.cluster_bindings[i] for i in hits]
        if namespace:
            by_subject = index.by_subject.get(namespace, {})
            hits = sorted({i for k in keys for i in by_subject.get(k, ())})
            found += [index.bindings[namespace][i] for i in hits]
        return found

    @staticmethod
    def _role_rules(index: _Index, binding: _Binding) -> tuple[_Rule, ...] | str:
        if binding.role_kind == "ClusterRole":
            rules = index.cluster_roles.get(binding.role_name)
            if rules is None:
                return f"clusterrole.{RBAC_GROUP} {_quote(binding.role_name)} not found"
            return rules
        if binding.role_kind == "Role":
            rules = index.roles.get((binding.namespace, binding.role_name))
            if rules is None:
                return f"role.{RBAC_GROUP} {_quote(binding.role_name)} not found"
            return rules
        return f"unsupported role reference kind: {_quote(binding.role_kind)}"

    def authorize(self, user: UserInfo, attrs: RequestAttributes) -> tuple[bool, str]:
        """(allowed, reason). Reasons are kube's: "RBAC: allowed by ..." when allowed, and
        on denial empty unless a binding referenced a role that could not be resolved."""
        if PRIVILEGED_GROUP in user.groups:
            return True, ""
        index = self._current()
        key = (
            user.name,
            user.groups,
            attrs.is_resource_request,
            attrs.verb,
            attrs.api_group,
            attrs.resource,
            attrs.subresource,
            attrs.namespace,
            attrs.name,
            "" if attrs.is_resource_request else attrs.path,
        )
        cached = index.decisions.get(key)
        if cached is not None:
            return cached
        decision = self._decide(index, user, attrs)
        if len(index.decisions) >= _DECISION_CACHE_LIMIT:
            index.decisions.clear()
        index.decisions[key] = decision
        return decision

    def _decide(self, index: _Index, user: UserInfo, attrs: RequestAttributes) -> tuple[bool, str]:
        problems: list[str] = []
        for binding in self._applicable(index, user, attrs.namespace):
            rules = self._role_rules(index, binding)
            if isinstance(rules, str):
                problems.append(rules)
                continue
            for rule in rules:
                if rule.allows(attrs):
                    subject = binding.first_subject(user)
                    assert subject is not None
                    return True, "RBAC: allowed by " + binding.describe(subject)
        return False, ("RBAC: " + _aggregate(problems)) if problems else ""

    def rules_for(self, user: UserInfo, namespace: str) -> RulesResult:
        index = self._current()
        resource_rules: list[dict[str, Any]] = []
        non_resource_rules: list[dict[str, Any]] = []
        problems: list[str] = []
        for binding in self._applicable(index, user, namespace):
            rules = self._role_rules(index, binding)
            if isinstance(rules, str):
                problems.append(rules)
                continue
            for rule in rules:
                if rule.resources:
                    out: dict[str, Any] = {"verbs": _verbs(rule.raw.get("verbs"))}
                    for k in ("apiGroups", "resources", "resourceNames"):
                        if rule.raw.get(k):
                            out[k] = list(rule.raw[k])
                    resource_rules.append(out)
                if rule.urls:
                    non_resource_rules.append(
                        {
                            "verbs": _verbs(rule.raw.get("verbs")),
                            "nonResourceURLs": list(rule.urls),
                        }
                    )
        return RulesResult(
            resource_rules, non_resource_rules, False, _aggregate(problems) if problems else ""
        )


def _verbs(value: Any) -> list[str]:
    """A rule's verbs as given (a copy), [] when missing."""
    return list(_strings(value))


def forbidden_for(user: str, attrs: RequestAttributes, reason: str = "") -> ApiError:
    """403 as kube-apiserver's responsewriters.Forbidden builds it for these attributes."""
    if not attrs.is_resource_request:
        message = f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"'
        if reason:
            message += f": {reason}"
        return ApiError(403, "Forbidden", message, {})
    resource = attrs.resource
    if attrs.subresource:
        resource += "/" + attrs.subresource
    scope = f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
    detail = (
        f'User "{user}" cannot {attrs.verb} resource "{resource}" '
        f'in API group "{attrs.api_group}"{scope}'
    )
    if reason:
        detail += f": {reason}"
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    if attrs.name:
        message = f'{qualified} "{attrs.name}" is forbidden: {detail}'
    else:
        message = f"{qualified} is forbidden: {detail}"
    details: dict[str, Any] = {}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    details["kind"] = attrs.resource
    return ApiError(403, "Forbidden", message, details)


class StaticRbacSource:
    """An in-memory RbacSource: objects added or removed by hand (tests, simple setups)."""

    _RESOURCES = {
        "Role": "roles",
        "ClusterRole": "clusterroles",
        "RoleBinding": "rolebindings",
        "ClusterRoleBinding": "clusterrolebindings",
    }

    def __init__(self, objects: Iterable[dict[str, Any]] = ()) -> None:
        self._objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._revision = 0
        for obj in objects:
            self.put(obj)

    def _key(self, obj: dict[str, Any]) -> tuple[str, str, str]:
        meta = obj.get("metadata") or {}
        resource = self._RESOURCES[obj["kind"]]
        return resource, str(meta.get("namespace", "") or ""), str(meta["name"])

    def put(self, obj: dict[str, Any]) -> None:
        self._objects[self._key(obj)] = obj
        self._revision += 1

    def remove(self, kind: str, name: str, namespace: str = "") -> None:
        self._objects.pop((self._RESOURCES[kind], namespace, name), None)
        self._revision += 1

    def revision(self) -> int:
        return self._revision

    def list(self, group: str, resource: str, namespace: str | None) -> list[dict[str, Any]]:
        if group != RBAC_GROUP:
            return []
        return [
            obj
            for (res, ns, _), obj in self._objects.items()
            if res == resource and (namespace is None or ns == namespace)
        ]
