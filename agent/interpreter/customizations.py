"""ResourceInterpreterCustomizations (config.karmada.io/v1alpha1): the user's, as the control
plane holds them, and the ones bundled with the agent for popular third-party kinds.

A customization names its target (apiVersion and kind) and carries one Lua script per
operation. For each kind and operation the first user customization (by name) with a script
for it wins, else the bundled one: a user customization overrides a bundled one operation by
operation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import yaml

Obj = dict[str, Any]
Origin = Literal["user", "bundled"]

KIND = "ResourceInterpreterCustomization"

# Operation -> (the field of spec.customizations holding its script, the Lua function).
INTERPRET_HEALTH = "InterpretHealth"
REFLECT_STATUS = "ReflectStatus"
RETAIN = "Retain"
SCRIPT_FIELDS = {
    INTERPRET_HEALTH: "healthInterpretation",
    REFLECT_STATUS: "statusReflection",
    RETAIN: "retention",
}


@dataclass(frozen=True)
class Customization:
    name: str
    api_version: str
    kind: str
    # Operation -> Lua script.
    scripts: dict[str, str]
    origin: Origin

    def describe(self) -> str:
        if self.origin == "bundled":
            return f'bundled customization "{self.name}"'
        return f'ResourceInterpreterCustomization "{self.name}"'


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def parse(obj: Obj, origin: Origin) -> Customization | None:
    """The customization an object describes; None for one without a usable target."""
    spec = _dict(obj.get("spec"))
    target, rules = _dict(spec.get("target")), _dict(spec.get("customizations"))
    api_version, kind = target.get("apiVersion"), target.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not kind:
        return None
    scripts: dict[str, str] = {}
    for operation, field in SCRIPT_FIELDS.items():
        rule = rules.get(field)
        if isinstance(rule, dict) and isinstance(rule.get("luaScript"), str):
            scripts[operation] = rule["luaScript"]
    name = str((obj.get("metadata") or {}).get("name") or "")
    return Customization(name, api_version, kind, scripts, origin)


def bundled() -> list[Customization]:
    """The customizations shipped in agent/interpreter/bundled/*.yaml."""
    out: list[Customization] = []
    folder = resources.files(__package__).joinpath("bundled")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(entry.read_text(encoding="utf-8")):
            # A List lets its items share scripts through YAML anchors.
            items = _dict(doc).get("items") if _dict(doc).get("kind") == "List" else [doc]
            for item in items if isinstance(items, list) else []:
                if _dict(item).get("kind") == KIND:
                    parsed = parse(item, "bundled")
                    if parsed is not None:
                        out.append(parsed)
    return out


class CustomizationSet:
    """Lookup of the winning customization per (apiVersion, kind, operation)."""

    def __init__(self, bundled: Iterable[Customization] = ()) -> None:
        self._bundled = list(bundled)
        self._user: dict[str, Customization] = {}
        self._index: dict[tuple[str, str, str], Customization] = {}
        self._reindex()

    def put(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        parsed = parse(obj, "user")
        if parsed is None:
            self._user.pop(name, None)
        else:
            self._user[name] = parsed
        self._reindex()

    def remove(self, obj: Obj) -> None:
        self._user.pop(str((obj.get("metadata") or {}).get("name") or ""), None)
        self._reindex()

    def replace_user(self, objs: Iterable[Obj]) -> None:
        self._user = {}
        for obj in objs:
            parsed = parse(obj, "user")
            if parsed is not None:
                self._user[parsed.name] = parsed
        self._reindex()

    def _reindex(self) -> None:
        index: dict[tuple[str, str, str], Customization] = {}
        users = sorted(self._user.values(), key=lambda c: c.name)
        for customization in [*users, *self._bundled]:
            for operation in customization.scripts:
                key = (customization.api_version, customization.kind, operation)
                index.setdefault(key, customization)
        self._index = index

    def lookup(self, api_version: str, kind: str, operation: str) -> Customization | None:
        return self._index.get((api_version, kind, operation))

    def targets(self) -> set[tuple[str, str]]:
        return {(c.api_version, c.kind) for c in self._index.values()}
