"""The resource interpreter chain the agent's controllers ask, no I/O of its own.

For each operation, in upstream's order: a ResourceInterpreterCustomization of the user's for
the kind, else (agent.sources.interpreter, which makes the calls) a webhook of a
ResourceInterpreterWebhookConfiguration, else a customization bundled with the agent, else the
built-in rules of Karmada's default interpreter (agent.karmada.health and reflect). The
operations the agent performs:

- InterpretHealth(observedObj) -> boolean: Healthy or Unhealthy; a failing script makes the
  health Unknown (the caller reports why).
- ReflectStatus(observedObj) -> table: the status reported in Work.status.manifestStatuses.
- Retain(desiredObj, observedObj) -> table: the object to apply, with member-owned values kept.
  As upstream's update does, the script sees the desired object at the observed object's
  resourceVersion, and its answer keeps that version (the apply is then conditional on it: values
  read from the member, its status included, never overwrite a newer version) and whatever else
  it holds, status included. Without a customization the desired object is applied as it is:
  server-side apply already leaves the fields other managers own alone.
"""

from __future__ import annotations

import threading
from typing import Any

from agent.karmada import health, reflect
from agent.karmada.names import HEALTHY, UNHEALTHY
from agent.karmada.work import json_type

from .customizations import (
    INTERPRET_HEALTH,
    REFLECT_STATUS,
    RETAIN,
    Customization,
    CustomizationSet,
    bundled,
)
from .kubelib import HELPERS
from .luavm import LuaScript, ScriptError, restore_empty
from .webhooks import WebhookSet

Obj = dict[str, Any]

# What Retain's result may not carry into an apply: metadata only the server sets.
_SERVER_METADATA = (
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


class InterpretError(Exception):
    """A customization's script (or a webhook) failed; the message names it."""

    def __init__(self, source: str, operation: str, reason: str, *, repeated: bool = False) -> None:
        super().__init__(f"{source} failed in {operation}: {reason}")
        self.source = source
        self.operation = operation
        # The same failure as the previous call for this kind: reported already.
        self.repeated = repeated


class InterpretReflectError(reflect.ReflectError):
    """ReflectStatus failed in a customization or webhook."""

    def __init__(self, error: InterpretError) -> None:
        super().__init__(str(error))
        self.repeated = error.repeated


class Interpreter:
    def __init__(self, customizations: CustomizationSet | None = None) -> None:
        self.customizations = customizations or CustomizationSet(bundled())
        # The webhooks of the control plane's ResourceInterpreterWebhookConfigurations; the
        # caller (agent.sources.interpreter) consults them between the user's
        # customizations and the bundled ones.
        self.webhooks = WebhookSet()
        # One sandboxed state per script, reused while the script is unchanged.
        self._scripts: dict[tuple[str, str, str], LuaScript] = {}
        # The operations may be called from worker threads (scripts run outside the event loop).
        self._lock = threading.Lock()

    def _customization(self, obj: Obj, operation: str) -> Customization | None:
        return self.customizations.lookup(
            str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), operation
        )

    def _run(self, customization: Customization, operation: str, *args: Obj) -> Any:
        source = customization.scripts[operation]
        key = (customization.origin + ":" + customization.name, operation, source)
        with self._lock:
            script = self._scripts.get(key)
            if script is None:
                # A changed or removed customization leaves its old states behind: drop them.
                for stale in [k for k in self._scripts if k[:2] == key[:2]]:
                    del self._scripts[stale]
                script = LuaScript(source, f"{customization.name}.{operation}", HELPERS)
                self._scripts[key] = script
        try:
            return script.call(operation, *args)[0]
        except (ScriptError, IndexError) as exc:
            raise InterpretError(customization.describe(), operation, str(exc)) from None

    def runs_script(self, obj: Obj, operation: str) -> bool:
        """A customization's script, not a built-in rule, performs `operation` on `obj`."""
        return self._customization(obj, operation) is not None

    def has_user_customization(self, obj: Obj, operation: str) -> bool:
        customization = self._customization(obj, operation)
        return customization is not None and customization.origin == "user"

    def interpret_health(self, obj: Obj) -> str:
        """Healthy, Unhealthy or (built-in rules, malformed status) Unknown; raises
        InterpretError when a customization's script fails."""
        customization = self._customization(obj, INTERPRET_HEALTH)
        if customization is None:
            return health.interpret_health(obj)
        result = self._run(customization, INTERPRET_HEALTH, obj)
        if not isinstance(result, bool):
            raise InterpretError(
                customization.describe(),
                INTERPRET_HEALTH,
                f"returned {_lua_type(result)}, not a boolean",
            )
        return HEALTHY if result else UNHEALTHY

    def reflect_status(self, obj: Obj) -> Obj | None:
        """The status to report, or None; raises reflect.ReflectError (naming the
        customization when its script failed)."""
        customization = self._customization(obj, REFLECT_STATUS)
        if customization is None:
            return reflect.reflect_status(obj)
        try:
            result = self._run(customization, REFLECT_STATUS, obj)
            if not isinstance(result, dict | list):
                reason = f"returned {_lua_type(result)}, not a table"
                raise InterpretError(customization.describe(), REFLECT_STATUS, reason)
            restored = restore_empty(result)
            if not isinstance(restored, dict):
                reason = "returned a list, not a status object"
                raise InterpretError(customization.describe(), REFLECT_STATUS, reason)
        except InterpretError as exc:
            raise InterpretReflectError(exc) from None
        return restored

    def retain(self, desired: Obj, observed: Obj) -> Obj:
        """The object to apply; raises InterpretError when a customization's script fails."""
        customization = self._customization(desired, RETAIN)
        if customization is None:
            return desired
        version = (observed.get("metadata") or {}).get("resourceVersion")
        if version is not None:
            desired = {**desired, "metadata": {**(desired.get("metadata") or {})}}
            desired["metadata"]["resourceVersion"] = version
        result = self._run(customization, RETAIN, desired, observed)
        restored = restore_empty(result, (desired, observed))
        if not isinstance(restored, dict):
            raise InterpretError(
                customization.describe(), RETAIN, f"returned {_lua_type(result)}, not an object"
            )
        return without_server_fields(restored, keep_version=True)


def without_server_fields(obj: Obj, *, keep_version: bool = False) -> Obj:
    """What a Retain answer may carry into an apply: all of it (status included) but the
    metadata only the server sets; its resourceVersion only with `keep_version` (the apply is
    then conditional on it)."""
    restored = dict(obj)
    meta = restored.get("metadata")
    if isinstance(meta, dict):
        dropped = _SERVER_METADATA if keep_version else (*_SERVER_METADATA, "resourceVersion")
        restored["metadata"] = {k: v for k, v in meta.items() if k not in dropped}
    return restored


def _lua_type(value: Any) -> str:
    if isinstance(value, dict | list):
        return "a table"
    return "nil" if value is None else json_type(value)
