"""An indexed in-memory cache of objects, keyed "namespace/name" (or "name" if cluster-scoped).

Only the reflector writes to it; everything else reads. Single event loop, so no locks.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from typing import Any

from agent.kube.shared import shared

JsonDict = dict[str, Any]
JsonList = builtins.list[JsonDict]
IndexFunc = Callable[[JsonDict], list[str]]
Transform = Callable[[JsonDict], JsonDict]


def object_key(obj: JsonDict) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    name = meta.get("name") or ""
    return f"{namespace}/{name}" if namespace else str(name)


def split_key(key: str) -> tuple[str, str]:
    """(namespace, name); namespace is "" for cluster-scoped keys."""
    namespace, _, name = key.rpartition("/")
    return namespace, name


def by_namespace(obj: JsonDict) -> list[str]:
    return [str((obj.get("metadata") or {}).get("namespace") or "")]


def drop_managed_fields(obj: JsonDict) -> JsonDict:
    """A common transform: managedFields are large and never needed by controllers."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = {k: v for k, v in meta.items() if k != "managedFields"}
        return {**obj, "metadata": meta}
    return obj


_WRITER_KEYS = ("manager", "operation", "subresource", "time")


def writers_only(obj: JsonDict) -> JsonDict:
    """managedFields cut down to who wrote and when (their field sets are the large part): what
    a controller needs to say who changed an object."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    writers = [
        {k: entry[k] for k in _WRITER_KEYS if k in entry}
        for entry in meta.get("managedFields") or []
        if isinstance(entry, dict)
    ]
    return {**obj, "metadata": {**meta, "managedFields": writers}}


class Store:
    """key -> object, plus named indexes (index name -> index value -> keys)."""

    def __init__(
        self,
        *,
        indexers: dict[str, IndexFunc] | None = None,
        transform: Transform | None = None,
    ) -> None:
        self._items: dict[str, JsonDict] = {}
        self._indexers: dict[str, IndexFunc] = {"namespace": by_namespace, **(indexers or {})}
        self._indexes: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._transform = transform
        # Bumped by every change of the content: a reader that derives something from the
        # whole store (a sum over every object) recomputes it only when this moved.
        self.revision = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[JsonDict]:
        return iter(list(self._items.values()))

    def prepare(self, obj: JsonDict) -> JsonDict:
        """Apply the transform, and share the short strings with every other cached object
        (agent.kube.shared); the reflector calls this before comparing or storing."""
        return shared(self._transform(obj) if self._transform is not None else obj)

    def get(self, key: str) -> JsonDict | None:
        return self._items.get(key)

    def get_by(self, namespace: str | None, name: str) -> JsonDict | None:
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def keys(self) -> list[str]:
        return list(self._items)

    def list(self, namespace: str | None = None) -> JsonList:
        if namespace is None:
            return list(self._items.values())
        return self.by_index("namespace", namespace)

    def by_index(self, index: str, value: str) -> JsonList:
        keys = self._indexes[index].get(value, set())
        return [self._items[k] for k in sorted(keys)]

    def index_keys(self, index: str, value: str) -> builtins.list[str]:
        return sorted(self._indexes[index].get(value, set()))

    def index_size(self, index: str, value: str) -> int:
        return len(self._indexes[index].get(value, ()))

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        self._indexers[name] = func
        self._indexes[name] = {}
        for key, obj in self._items.items():
            for value in func(obj):
                self._indexes[name].setdefault(value, set()).add(key)

    def put(self, obj: JsonDict) -> tuple[str, JsonDict | None]:
        """Store an already prepared object; returns (key, previous object)."""
        key = object_key(obj)
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        self._index(key, obj)
        self.revision += 1
        return key, old

    def delete(self, key: str) -> JsonDict | None:
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
            self.revision += 1
        return old

    def replace(self, objects: JsonList) -> None:
        """Swap the whole content (prepared objects)."""
        self._items = {}
        self._indexes = {n: {} for n in self._indexers}
        self.revision += 1
        for obj in objects:
            self.put(obj)

    def _index(self, key: str, obj: JsonDict) -> None:
        for name, func in self._indexers.items():
            for value in func(obj):
                self._indexes[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: JsonDict) -> None:
        for name, func in self._indexers.items():
            index = self._indexes[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
