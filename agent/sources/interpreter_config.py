"""The control plane's resource interpreter configuration, from list+watches, kept in the
agent's interpreter chain so that a change takes effect without a restart:
ResourceInterpreterCustomizations (Lua) and ResourceInterpreterWebhookConfigurations.

Shared by the execution (Retain) and workStatus (InterpretHealth, ReflectStatus) controllers:
each starts and stops the watches, and hears of every change so that it can look at its Works
again. Workers do not wait for these watches: without them (an older control-plane RBAC that
does not grant them) Works are interpreted by the bundled and built-in rules, and a
configuration that arrives later sends every Work through reconcile again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.interpreter import Interpreter
from agent.karmada.names import CONFIG_API_VERSION as API_VERSION
from agent.kube.client import GVR, KubeClient
from agent.kube.informers import Informer, typed_transform
from agent.kube.listeners import listen
from agent.kube.reflector import HandlerFuncs, Reflector
from agent.logs import get_logger
from agent.resources import (
    RESOURCE_INTERPRETER_CUSTOMIZATIONS,
    RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS,
)

log = get_logger(__name__)

JsonDict = dict[str, Any]


class ConfigInformer(Informer):
    """One cluster-scoped configuration kind, each change passed to `put` or `remove`."""

    def __init__(
        self,
        client: KubeClient,
        gvr: GVR,
        kind: str,
        put: Callable[[JsonDict], None],
        remove: Callable[[JsonDict], None],
    ) -> None:
        super().__init__(
            Reflector(client, gvr, transform=typed_transform(API_VERSION, kind), name=gvr.resource)
        )
        self.kind = kind
        self._put, self._remove = put, remove
        self._listeners: list[Callable[[], None]] = []
        self.reflector.add_handler(
            HandlerFuncs(
                add=self._applied,
                update=lambda _old, new: self._applied(new),
                delete=self._removed,
            )
        )

    def on_change(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` after every change; returns the unsubscribe."""
        return listen(self._listeners, callback)

    def _applied(self, obj: JsonDict) -> None:
        self._put(obj)
        self._changed("applied", obj)

    def _removed(self, obj: JsonDict) -> None:
        self._remove(obj)
        self._changed("removed", obj)

    def _changed(self, what: str, obj: JsonDict) -> None:
        log.info(f"{self.kind} {what}", name=(obj.get("metadata") or {}).get("name"))
        for callback in list(self._listeners):
            callback()


def config_watches(client: KubeClient, interpreter: Interpreter) -> list[ConfigInformer]:
    customizations, webhooks = interpreter.customizations, interpreter.webhooks
    return [
        ConfigInformer(
            client,
            RESOURCE_INTERPRETER_CUSTOMIZATIONS,
            "ResourceInterpreterCustomization",
            customizations.put,
            customizations.remove,
        ),
        ConfigInformer(
            client,
            RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS,
            "ResourceInterpreterWebhookConfiguration",
            webhooks.put,
            webhooks.remove,
        ),
    ]
