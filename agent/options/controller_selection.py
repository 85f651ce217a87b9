"""The controllers this agent runs and `--controllers`, which picks among them."""

from __future__ import annotations

from dataclasses import dataclass

CONTROLLERS = (
    "certRotation",
    "clusterStatus",
    "endpointsliceCollect",
    "execution",
    "serviceExport",
    "workStatus",
)
# Upstream leaves certRotation out of '*'; this agent includes it (see agent.options).
UPSTREAM_DISABLED_BY_DEFAULT = frozenset({"certRotation"})
DISABLED_BY_DEFAULT: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ControllerSelection:
    """`--controllers` semantics: the first entry naming a controller decides ('foo' on, '-foo' off);
    otherwise '*' turns on every controller that is on by default; without '*' it stays off."""

    entries: tuple[str, ...] = ("*",)

    def explicit(self, name: str) -> bool | None:
        for entry in self.entries:
            if entry == name:
                return True
            if entry == "-" + name:
                return False
        return None

    def is_enabled(self, name: str) -> bool:
        decision = self.explicit(name)
        if decision is not None:
            return decision
        return "*" in self.entries and name not in DISABLED_BY_DEFAULT
