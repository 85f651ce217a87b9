"""A small in-memory Loopback for controller tests: objects, resourceVersions, watches.

It is not the emulator's core: just enough kube-apiserver behaviour (status and approval
subresources, finalizers, optimistic concurrency, 410 on expired watches) to drive the
controllers through the same protocol they use against the real core.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import re
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from emulator import errors
from tests import polling

JSON = dict[str, Any]
_PATH = re.compile(
    r"^(?P<prefix>/api/v1|/apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?"
    r"/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)
_STATUS_TYPES = {
    "clusters",
    "certificatesigningrequests",
    "deployments",
    "statefulsets",
    "daemonsets",
    "replicasets",
    "jobs",
    "pods",
    "services",
    "persistentvolumeclaims",
    "nodes",
}


def _parse(path: str) -> tuple[str, str, str, str, str]:
    match = _PATH.match(path)
    assert match, path
    return (
        match["prefix"],
        match["ns"] or "",
        match["resource"],
        match["name"] or "",
        match["sub"] or "",
    )


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[tuple[str, str], JSON]] = {}
        self.history: list[tuple[int, tuple[str, str], str, JSON]] = []
        self.rv = itertools.count(1)
        self.current_rv = 0
        self.oldest_rv = 0
        self.watchers: list[
            tuple[tuple[str, str], str, Callable[[JSON], bool], asyncio.Queue[JSON | None]]
        ] = []
        self.sar_allowed: Callable[[JSON], bool] = lambda _spec: False
        self.sar_requests: list[JSON] = []
        self.calls: list[tuple[str, str]] = []

    # --- helpers -------------------------------------------------------------------------

    def _bump(self) -> str:
        self.current_rv = next(self.rv)
        return str(self.current_rv)

    def _emit(self, gr: tuple[str, str], event_type: str, obj: JSON) -> None:
        snapshot = copy.deepcopy(obj)
        self.history.append((self.current_rv, gr, event_type, snapshot))
        for w_gr, w_ns, matches, queue in self.watchers:
            if (
                w_gr == gr
                and (not w_ns or snapshot["metadata"].get("namespace") == w_ns)
                and matches(snapshot)
            ):
                queue.put_nowait({"type": event_type, "object": copy.deepcopy(snapshot)})

    def expire_watches(self) -> None:
        """Compact history and end every open watch with ERROR 410, as etcd compaction does."""
        self.oldest_rv = self.current_rv + 1
        self.history.clear()
        for *_rest, queue in self.watchers:
            queue.put_nowait(
                {"type": "ERROR", "object": errors.resource_expired(0).status() | {"code": 410}}
            )
            queue.put_nowait(None)
        self.watchers.clear()

    def stored(self, path: str) -> JSON | None:
        prefix, ns, resource, name, _ = _parse(path)
        obj = self.objects.get((prefix, resource), {}).get((ns, name))
        return copy.deepcopy(obj) if obj else None

    def items(self, prefix: str, resource: str, ns: str | None = None) -> list[JSON]:
        return [
            copy.deepcopy(o)
            for (o_ns, _), o in sorted(self.objects.get((prefix, resource), {}).items())
            if ns is None or o_ns == ns
        ]

    @staticmethod
    def _selector(query: dict[str, str]) -> Callable[[JSON], bool]:
        field = query.get("fieldSelector", "")
        label = query.get("labelSelector", "")

        def matches(obj: JSON) -> bool:
            for term in filter(None, field.split(",")):
                key, _, value = term.partition("=")
                actual = (
                    obj.get("type") if key == "type" else obj["metadata"].get(key.split(".", 1)[1])
                )
                if actual != value:
                    return False
            labels = obj["metadata"].get("labels") or {}
            for term in filter(None, label.split(",")):
                key, _, value = term.partition("=")
                if labels.get(key) != value:
                    return False
            return True

        return matches

    # --- Loopback ------------------------------------------------------------------------

    async def get(self, path: str, **query: str) -> JSON:
        self.calls.append(("get", path))
        prefix, ns, resource, name, _ = _parse(path)
        obj = self.objects.get((prefix, resource), {}).get((ns, name))
        if obj is None:
            raise errors.not_found(
                prefix.split("/")[2] if prefix != "/api/v1" else "", resource, name
            )
        return copy.deepcopy(obj)

    async def list(self, path: str, **query: str) -> JSON:
        self.calls.append(("list", path))
        prefix, ns, resource, _, _ = _parse(path)
        matches = self._selector(query)
        items = [o for o in self.items(prefix, resource, ns or None) if matches(o)]
        return {
            "kind": "List",
            "metadata": {"resourceVersion": str(self.current_rv)},
            "items": items,
        }

    async def create(self, path: str, body: JSON, **query: str) -> JSON:
        self.calls.append(("create", path))
        prefix, ns, resource, _, _ = _parse(path)
        if resource == "subjectaccessreviews":
            self.sar_requests.append(copy.deepcopy(body["spec"]))
            return {**body, "status": {"allowed": self.sar_allowed(body["spec"])}}
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta["name"]
        store = self.objects.setdefault((prefix, resource), {})
        if (ns, name) in store:
            raise errors.already_exists("", resource, name)
        if ns:
            meta["namespace"] = ns
        meta.update(
            uid=str(uuid.uuid4()),
            creationTimestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            generation=1,
            resourceVersion=self._bump(),
        )
        store[(ns, name)] = obj
        self._emit((prefix, resource), "ADDED", obj)
        return copy.deepcopy(obj)

    async def update(self, path: str, body: JSON, **query: str) -> JSON:
        self.calls.append(("update", path))
        prefix, ns, resource, name, sub = _parse(path)
        store = self.objects.get((prefix, resource), {})
        old = store.get((ns, name))
        if old is None:
            raise errors.not_found("", resource, name)
        sent_rv = body.get("metadata", {}).get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict("", resource, name, errors.STALE_OBJECT)
        new = copy.deepcopy(old)
        if sub == "status":
            new["status"] = copy.deepcopy(body.get("status") or {})
        elif sub == "approval":
            new.setdefault("status", {})["conditions"] = copy.deepcopy(
                body.get("status", {}).get("conditions") or []
            )
        else:
            new = copy.deepcopy(body)
            new["metadata"] = {
                **old["metadata"],
                **{
                    k: v
                    for k, v in body["metadata"].items()
                    if k in ("labels", "annotations", "finalizers", "ownerReferences")
                },
            }
            for key in ("labels", "annotations", "finalizers", "ownerReferences"):
                if key not in body["metadata"]:
                    new["metadata"].pop(key, None)
            if resource in _STATUS_TYPES:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            if new.get("spec") != old.get("spec"):
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        new["metadata"]["resourceVersion"] = self._bump()
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del store[(ns, name)]
            self._emit((prefix, resource), "DELETED", new)
            return copy.deepcopy(new)
        store[(ns, name)] = new
        self._emit((prefix, resource), "MODIFIED", new)
        return copy.deepcopy(new)

    async def patch(self, path: str, body: Any, patch_type: str, **query: str) -> JSON:
        raise NotImplementedError

    async def delete(self, path: str, body: JSON | None = None, **query: str) -> JSON:
        self.calls.append(("delete", path))
        prefix, ns, resource, name, _ = _parse(path)
        store = self.objects.get((prefix, resource), {})
        obj = store.get((ns, name))
        if obj is None:
            raise errors.not_found("", resource, name)
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = datetime.now(UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                )
                obj["metadata"]["resourceVersion"] = self._bump()
                self._emit((prefix, resource), "MODIFIED", obj)
            return copy.deepcopy(obj)
        del store[(ns, name)]
        obj["metadata"]["resourceVersion"] = self._bump()
        self._emit((prefix, resource), "DELETED", obj)
        return {"kind": "Status", "status": "Success"}

    def watch(self, path: str, **query: str) -> AsyncIterator[JSON]:
        return self._watch(path, query)

    async def _watch(self, path: str, query: dict[str, str]) -> AsyncIterator[JSON]:
        prefix, ns, resource, _, _ = _parse(path)
        since = int(query.get("resourceVersion") or 0)
        if since and since < self.oldest_rv - 1:
            raise errors.resource_expired(since)
        matches = self._selector(query)
        queue: asyncio.Queue[JSON | None] = asyncio.Queue()
        for rv, gr, event_type, obj in self.history:
            if (
                rv > since
                and gr == (prefix, resource)
                and (not ns or obj["metadata"].get("namespace") == ns)
                and matches(obj)
            ):
                queue.put_nowait({"type": event_type, "object": copy.deepcopy(obj)})
        entry = ((prefix, resource), ns, matches, queue)
        self.watchers.append(entry)
        try:
            while True:
                event = await queue.get()
                if event is None:
                    return
                yield event
        finally:
            if entry in self.watchers:
                self.watchers.remove(entry)


async def eventually(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    """Wait until `check()` returns something truthy."""
    return await polling.eventually(check, timeout=timeout, interval=0.01)


_CA: Any = None
_TOKENS: Any = None


def make_ctx(api: FakeApi, **knobs: Any) -> Any:
    """A ControllerContext on `api` with a (shared, generated once) CA and token issuer."""
    from emulator.controllers import ControllerContext, Knobs
    from emulator.pki import CertificateAuthority, ServiceAccountTokenIssuer

    global _CA, _TOKENS
    if _CA is None:
        _CA = CertificateAuthority.generate("test-ca")
        _TOKENS = ServiceAccountTokenIssuer.generate()
    return ControllerContext(
        api=api,
        ca=_CA,
        sa_tokens=_TOKENS,
        cluster_name="member1",
        knobs=Knobs(retry_delay=0.05, **knobs),
        server_url="https://127.0.0.1:5443",
    )


class Running:
    """`async with Running(controller.run(ctx)):` runs a controller for the block."""

    def __init__(self, *jobs: Any) -> None:
        self.jobs = jobs
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Running:
        self.tasks = [asyncio.create_task(job) for job in self.jobs]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
