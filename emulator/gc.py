"""Namespace lifecycle and ownerReference garbage collection, as kube-controller-manager's.

Runs off storage events (a listener), one loop iteration after each write, so
its effects are asynchronous to the request that caused them, as in a cluster.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from .deferred import DeferredQueue
from .errors import ApiError
from .handlers.context import WriteCtx
from .registry import JSON, Registry, ResourceType
from .storage import GR, Event, Storage

if TYPE_CHECKING:
    from .handlers import Handlers

NS_GR: GR = ("", "namespaces")
Key = tuple[GR, str, str]


class GarbageCollector:
    def __init__(self, registry: Registry, storage: Storage, handlers: Handlers) -> None:
        self.registry = registry
        self.storage = storage
        self.handlers = handlers
        # owner uid -> dependents; uid -> object key (for owners)
        self._dependents: dict[str, set[Key]] = {}
        self._by_uid: dict[str, Key] = {}
        self._deferred: DeferredQueue[tuple[GR, Event]] = DeferredQueue(self._process_quietly)
        storage.listeners.append(self._on_event)

    # --- event intake ---

    def _on_event(self, gr: GR, ev: Event) -> None:
        key: Key = (gr, ev.namespace, ev.name)
        meta = ev.obj.get("metadata") or {}
        uid = meta.get("uid", "")
        old_refs = {
            r.get("uid")
            for r in ((ev.prev or {}).get("metadata") or {}).get("ownerReferences") or []
        }
        if ev.type == "DELETED":
            self._by_uid.pop(uid, None)
            for owner in old_refs:
                deps = self._dependents.get(owner)
                if deps:
                    deps.discard(key)
        else:
            self._by_uid[uid] = key
            new_refs = {r.get("uid") for r in meta.get("ownerReferences") or []}
            for owner in old_refs - new_refs:
                deps = self._dependents.get(owner)
                if deps:
                    deps.discard(key)
            for owner in new_refs:
                self._dependents.setdefault(owner, set()).add(key)
        self._deferred.add((gr, ev))

    def _process_quietly(self, item: tuple[GR, Event]) -> None:
        with contextlib.suppress(ApiError):
            self._process(*item)

    # --- processing ---

    def _process(self, gr: GR, ev: Event) -> None:
        meta = ev.obj.get("metadata") or {}
        uid = meta.get("uid", "")
        if ev.type == "DELETED":
            self._owner_gone(uid)
            if gr != NS_GR and ev.namespace:
                self._namespace_step(ev.namespace)
            self._foreground_recheck(ev.prev or ev.obj)
            return
        if gr == NS_GR and meta.get("deletionTimestamp"):
            self._namespace_step(ev.name)
        fins = meta.get("finalizers") or []
        if meta.get("deletionTimestamp"):
            if "orphan" in fins:
                self._orphan(gr, ev.obj)
            if "foregroundDeletion" in fins:
                self._foreground(gr, ev.obj)
        if meta.get("ownerReferences") and ev.type in ("ADDED", "MODIFIED"):
            self._attempt_to_delete(gr, ev.obj)

    def _rt(self, gr: GR) -> ResourceType | None:
        for rt in self.registry.all():
            if rt.group_resource == gr:
                return rt
        return None

    def _current(self, key: Key) -> JSON | None:
        return self.storage.get(*key)

    def _owner_state(self, ref: JSON, dependent_namespace: str) -> str | None:
        """How kube's garbage collector classifies an owner reference: "solid" (the owner
        exists), "waiting" (it exists and is being deleted in the foreground), "dangling" (no
        object of that name and uid) or "invalid" (a cluster-scoped dependent naming a
        namespaced owner); None when the owner's kind is unknown (kube retries the lookup)."""
        rt = self.registry.by_api_version_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        if rt is None:
            group = ref.get("apiVersion", "").rpartition("/")[0]
            rt = self.registry.by_kind(group, ref.get("kind", ""))
        if rt is None:
            return None
        if rt.namespaced and not dependent_namespace:
            return "invalid"
        owner = self.storage.get(
            rt.group_resource, dependent_namespace if rt.namespaced else "", ref.get("name", "")
        )
        if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
            return "dangling"
        meta = owner["metadata"]
        if meta.get("deletionTimestamp") and "foregroundDeletion" in (meta.get("finalizers") or []):
            return "waiting"
        return "solid"

    def _owner_gone(self, uid: str) -> None:
        for key in list(self._dependents.pop(uid, set())):
            obj = self._current(key)
            if obj is not None:
                self._attempt_to_delete(key[0], obj)

    def _attempt_to_delete(self, gr: GR, obj: JSON) -> None:
        """kube-controller-manager's attemptToDeleteItem for one dependent: references to owners
        that are gone (or waiting for their dependents) are dropped while another owner
        exists; without one, the dependent is deleted, in the foreground when an owner waits
        for it and it has dependents of its own, else as its own finalizers ask (orphan,
        foregroundDeletion), else in the background."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return
        refs = meta.get("ownerReferences") or []
        ns = meta.get("namespace", "")
        states = [(ref, self._owner_state(ref, ns)) for ref in refs]
        if any(state is None or state == "invalid" for _, state in states):
            return
        solid = [ref for ref, state in states if state == "solid"]
        if len(solid) == len(refs):
            return
        rt = self._rt(gr)
        if rt is None:
            return
        if solid:
            new = _copy_meta(obj)
            new["metadata"]["ownerReferences"] = solid
            self._write(rt, new)
            return
        finalizers = meta.get("finalizers") or []
        waiting = any(state == "waiting" for _, state in states)
        if waiting and self._dependents.get(meta.get("uid", "")):
            policy = "Foreground"
        elif "orphan" in finalizers:
            policy = "Orphan"
        elif "foregroundDeletion" in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        self.handlers.deletes.delete_one(rt, ns, meta["name"], {"propagationPolicy": policy})

    def _write(self, rt: ResourceType, new: JSON) -> None:
        new["metadata"].pop("resourceVersion", None)
        self.handlers.updates.commit_update(
            rt, new, WriteCtx(user=None, manager="kube-controller-manager")
        )

    def _orphan(self, gr: GR, owner: JSON) -> None:
        uid = owner["metadata"]["uid"]
        for key in list(self._dependents.get(uid, set())):
            dep = self._current(key)
            rt = self._rt(key[0])
            if dep is None or rt is None:
                continue
            new = _copy_meta(dep)
            refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._write(rt, new)
        self._dependents.pop(uid, None)
        self._drop_finalizer(gr, owner, "orphan")

    def _foreground(self, gr: GR, owner: JSON) -> None:
        uid = owner["metadata"]["uid"]
        for key in list(self._dependents.get(uid, set())):
            dep = self._current(key)
            if dep is not None:
                self._attempt_to_delete(key[0], dep)
        self._foreground_recheck_owner(gr, owner)

    def _foreground_recheck(self, dependent: JSON) -> None:
        for ref in (dependent.get("metadata") or {}).get("ownerReferences") or []:
            key = self._by_uid.get(ref.get("uid", ""))
            if key is None:
                continue
            owner = self._current(key)
            if owner is not None and "foregroundDeletion" in (
                owner["metadata"].get("finalizers") or []
            ):
                self._foreground_recheck_owner(key[0], owner)

    def _foreground_recheck_owner(self, gr: GR, owner: JSON) -> None:
        uid = owner["metadata"]["uid"]
        for key in self._dependents.get(uid, set()):
            dep = self._current(key)
            if dep is None:
                continue
            for ref in dep["metadata"].get("ownerReferences") or []:
                if ref.get("uid") == uid and ref.get("blockOwnerDeletion"):
                    return
        self._drop_finalizer(gr, owner, "foregroundDeletion")

    def _drop_finalizer(self, gr: GR, obj: JSON, finalizer: str) -> None:
        rt = self._rt(gr)
        current = self.storage.get(
            gr, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        )
        if rt is None or current is None:
            return
        if finalizer not in (current["metadata"].get("finalizers") or []):
            return
        new = _copy_meta(current)
        new["metadata"]["finalizers"] = [
            f for f in current["metadata"].get("finalizers") or [] if f != finalizer
        ]
        self._write(rt, new)

    # --- namespaces ---

    def _namespace_step(self, name: str) -> None:
        ns = self.storage.get(NS_GR, "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        for rt in self.registry.namespaced_group_resources():
            for obj in self.storage.list(rt.group_resource, name):
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    self.handlers.deletes.delete_one(rt, name, obj["metadata"]["name"], {})
                except ApiError:
                    continue
        if self.storage.namespaces_with_content(name):
            return
        current = self.storage.get(NS_GR, "", name)
        if current is None:
            return
        spec_fins = (current.get("spec") or {}).get("finalizers") or []
        if "kubernetes" not in spec_fins:
            return
        ns_rt = self._rt(NS_GR)
        if ns_rt is None:
            return
        new = _copy_meta(current)
        new["spec"] = {
            **(current.get("spec") or {}),
            "finalizers": [f for f in spec_fins if f != "kubernetes"],
        }
        self._write(ns_rt, new)


def _copy_meta(obj: JSON) -> JSON:
    """A shallow copy whose metadata can be edited."""
    new = dict(obj)
    new["metadata"] = dict(obj["metadata"])
    return new
