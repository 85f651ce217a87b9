"""Member-side caches of the objects Karmada manages: one list+watch per resource type in use.

Each Reflector covers all namespaces but only objects labelled `karmada.io/managed=true`, so
memory grows with what Karmada put on the member, not with the member's size (upstream's
informers cache every object of a type). Beside it, a second list+watch of the same type keeps
only the names of the other objects (`karmada.io/managed!=true`), so that "does an object we
may not take over exist under this name?" is answered from memory too (`known_absent`): an
apply needs no GET before it. Until both have synced, callers do a live GET.

A watch with a label selector reports an object that stops matching (its label removed) as
DELETED, which is exactly what a subscriber interested in Karmada's objects wants to hear.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import structlog

from agent.karmada import names
from agent.kube.client import GVR, KubeClient
from agent.kube.discovery import RESTMapper
from agent.kube.reflector import HandlerFuncs, Reflector
from agent.kube.store import drop_managed_fields
from agent.options import Options

log = structlog.get_logger(__name__)

JsonDict = dict[str, Any]
# handler(event_type, gvr, obj) with event_type "ADDED", "MODIFIED" or "DELETED".
MemberEventHandler = Callable[[str, GVR, JsonDict], None]

MANAGED_SELECTOR = f"{names.MANAGED_LABEL}=true"
# Every other object (label absent or not "true"): only their names are kept.
OTHERS_SELECTOR = f"{names.MANAGED_LABEL}!=true"


def name_only(obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata") or {}
    keep = ("name", "namespace", "resourceVersion")
    return {"metadata": {k: meta[k] for k in keep if k in meta}}


def typed_transform(api_version: str, kind: str) -> Callable[[JsonDict], JsonDict]:
    """Drop managedFields, and fill apiVersion and kind: the items of a list of built-in types
    come without them (only watch events carry them), and health and status rules need them."""

    def transform(obj: JsonDict) -> JsonDict:
        obj = drop_managed_fields(obj)
        if obj.get("apiVersion") and (obj.get("kind") or not kind):
            return obj
        filled = {**obj, "apiVersion": obj.get("apiVersion") or api_version}
        if kind and not obj.get("kind"):
            filled["kind"] = kind
        return filled

    return transform


class MemberObjects:
    name = "member-objects"

    def __init__(
        self,
        client: KubeClient,
        mapper: RESTMapper,
        options: Options | None = None,
        *,
        label_selector: str = MANAGED_SELECTOR,
        others_selector: str | None = OTHERS_SELECTOR,
    ) -> None:
        self.client = client
        self.mapper = mapper
        self.options = options or Options()
        self.label_selector = label_selector
        # The complement of `label_selector` (None: no name cache, always GET).
        self.others_selector = others_selector
        self._reflectors: dict[GVR, Reflector] = {}
        self._others: dict[GVR, Reflector] = {}
        self._tasks: dict[GVR, list[asyncio.Task[None]]] = {}
        self._subscribers: list[MemberEventHandler] = []

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Nothing to start: watches begin on demand with `ensure`."""

    async def stop(self) -> None:
        """Stop every watch and forget the caches (a later `ensure` starts afresh)."""
        tasks = [task for group in self._tasks.values() for task in group]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        self._reflectors.clear()
        self._others.clear()

    # --- watches -------------------------------------------------------------------------------

    def ensure(self, gvr: GVR, kind: str = "") -> None:
        """Start watching `gvr` unless already watching; returns at once. `kind` (when given)
        is filled into cached objects that lack it."""
        if gvr in self._reflectors:
            return
        reflector = Reflector(
            self.client,
            gvr,
            label_selector=self.label_selector,
            transform=typed_transform(gvr.api_version, kind),
            name=f"member {gvr}",
        )
        reflector.add_handler(
            HandlerFuncs(
                add=lambda obj: self._fan_out("ADDED", gvr, obj),
                update=lambda _old, new: self._fan_out("MODIFIED", gvr, new),
                delete=lambda obj: self._fan_out("DELETED", gvr, obj),
            )
        )
        self._reflectors[gvr] = reflector
        loop = asyncio.get_running_loop()
        self._tasks[gvr] = [loop.create_task(reflector.run(), name=f"member watch {gvr}")]
        if self.others_selector is not None:
            others = Reflector(
                self.client,
                gvr,
                label_selector=self.others_selector,
                transform=name_only,
                name=f"member {gvr} names",
            )
            self._others[gvr] = others
            self._tasks[gvr].append(
                loop.create_task(others.run(), name=f"member watch {gvr} names")
            )
        log.info("watching member objects", resource=str(gvr), selector=self.label_selector)

    @property
    def watched(self) -> list[GVR]:
        return list(self._reflectors)

    def has_synced(self, gvr: GVR) -> bool:
        reflector = self._reflectors.get(gvr)
        return reflector is not None and reflector.has_synced

    async def wait_synced(self, gvr: GVR, timeout: float | None = None) -> bool:
        """Wait for the first list of `gvr` (starting its watch if needed). `timeout` defaults to
        --cluster-cache-sync-timeout."""
        self.ensure(gvr)
        if timeout is None:
            timeout = self.options.cluster_cache_sync_timeout.total_seconds()
        return await self._reflectors[gvr].wait_synced(timeout)

    # --- reads ---------------------------------------------------------------------------------

    def get(self, gvr: GVR, namespace: str | None, name: str) -> tuple[JsonDict | None, bool]:
        """(object or None, synced). When `synced` is False the None means "unknown": the type
        is not watched or its first list has not finished."""
        reflector = self._reflectors.get(gvr)
        if reflector is None or not reflector.has_synced:
            return None, False
        return reflector.store.get_by(namespace or None, name), True

    def known_absent(self, gvr: GVR, namespace: str | None, name: str) -> bool:
        """True when both caches of `gvr` have synced and neither holds `namespace/name`: no
        such object exists (as far as the watches have told), so nothing needs a GET."""
        managed = self._reflectors.get(gvr)
        others = self._others.get(gvr)
        if managed is None or others is None or not (managed.has_synced and others.has_synced):
            return False
        key_ns = namespace or None
        return (
            managed.store.get_by(key_ns, name) is None and others.store.get_by(key_ns, name) is None
        )

    def list(self, gvr: GVR, namespace: str | None = None) -> list[JsonDict]:
        reflector = self._reflectors.get(gvr)
        return reflector.store.list(namespace) if reflector is not None else []

    # --- events --------------------------------------------------------------------------------

    def subscribe(self, handler: MemberEventHandler) -> Callable[[], None]:
        """Call `handler(event_type, gvr, obj)` for every change of every watched type, objects
        already cached included (replayed as ADDED). Returns a function that unsubscribes."""
        self._subscribers.append(handler)
        for gvr, reflector in list(self._reflectors.items()):
            for obj in reflector.store:
                self._call(handler, "ADDED", gvr, obj)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(handler)

        return unsubscribe

    def _fan_out(self, event_type: str, gvr: GVR, obj: JsonDict) -> None:
        for handler in list(self._subscribers):
            self._call(handler, event_type, gvr, obj)

    @staticmethod
    def _call(handler: MemberEventHandler, event_type: str, gvr: GVR, obj: JsonDict) -> None:
        try:
            handler(event_type, gvr, obj)
        except Exception:
            log.exception("member object handler failed", resource=str(gvr))
