"""The control plane's ResourceInterpreterCustomizations, from one list+watch, kept in the
agent's interpreter chain so that a change takes effect without a restart.

Shared by the execution (Retain) and workStatus (InterpretHealth, ReflectStatus) controllers:
each starts and stops it, and hears of every change so that it can look at its Works again.
Workers do not wait for this watch: without it (an older control-plane RBAC that does not
grant it) Works are interpreted by the bundled and built-in rules, and a customization that
arrives later sends every Work through reconcile again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from agent.interpreter import Interpreter
from agent.interpreter.customizations import API_VERSION, KIND
from agent.kube.client import KubeClient
from agent.kube.informers import WatchedReflector, typed_transform
from agent.kube.reflector import HandlerFuncs, Reflector
from agent.resources import RESOURCE_INTERPRETER_CUSTOMIZATIONS

log = structlog.get_logger(__name__)

JsonDict = dict[str, Any]


class CustomizationWatch(WatchedReflector):
    def __init__(self, client: KubeClient, interpreter: Interpreter) -> None:
        super().__init__(
            Reflector(
                client,
                RESOURCE_INTERPRETER_CUSTOMIZATIONS,
                transform=typed_transform(API_VERSION, KIND),
                name="resourceinterpretercustomizations",
            )
        )
        self.interpreter = interpreter
        self._listeners: list[Callable[[], None]] = []
        self.reflector.add_handler(
            HandlerFuncs(
                add=self._put, update=lambda _old, new: self._put(new), delete=self._remove
            )
        )

    def on_change(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` after every change of the customizations; returns the unsubscribe."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    def _put(self, obj: JsonDict) -> None:
        self.interpreter.customizations.put(obj)
        self._changed("applied", obj)

    def _remove(self, obj: JsonDict) -> None:
        self.interpreter.customizations.remove(obj)
        self._changed("removed", obj)

    def _changed(self, what: str, obj: JsonDict) -> None:
        spec = obj.get("spec") or {}
        log.info(
            "resource interpreter customization " + what,
            name=(obj.get("metadata") or {}).get("name"),
            target=spec.get("target") if isinstance(spec, dict) else None,
        )
        for callback in list(self._listeners):
            callback()
