"""ResourceInterpreterCustomization objects for the tests."""

from __future__ import annotations

from typing import Any

FIELDS = {"health": "healthInterpretation", "reflect": "statusReflection", "retain": "retention"}


def customization(name: str, api_version: str, kind: str, **scripts: str) -> dict[str, Any]:
    """A customization of `kind` with a Lua script per operation (health, reflect, retain)."""
    return {
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": name},
        "spec": {
            "target": {"apiVersion": api_version, "kind": kind},
            "customizations": {FIELDS[k]: {"luaScript": v} for k, v in scripts.items()},
        },
    }
