"""Backends' discovery, as kube-aggregator keeps it for aggregated discovery and OpenAPI v3.

For each backend (a Service) the last document fetched: `GET /apis` asking for aggregated
discovery (apidiscovery.k8s.io v2, then v2beta1) as system:kube-aggregator in system:masters,
with If-None-Match once an ETag is known; a backend that does not serve aggregated discovery is
asked for the group version's legacy APIResourceList instead, converted as kube converts it.
A failed refresh keeps what was known, marked Stale; a group version never fetched shows with
no resources, Stale. The backend's OpenAPI v3 root is read too: where each of its group
versions' documents is (`/openapi/v3/apis/<group>/<version>?hash=...`), for the front's root.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import httpx

from ..discovery import AGG_V2, AGG_V2BETA1
from ..registry import JSON
from ..requestheader import proxy_headers
from ..wire import UserInfo
from .proxy import Backend, BackendProxy, UnreachableError

log = logging.getLogger(__name__)

AGGREGATOR = UserInfo("system:kube-aggregator", ("system:masters",))
_ACCEPT = f"{AGG_V2},{AGG_V2BETA1},application/json"
GroupVersion = tuple[str, str]


@dataclass
class _Cached:
    versions: dict[GroupVersion, JSON] = field(default_factory=dict)
    etag: str = ""
    stale: bool = False
    # OpenAPI v3 root entries: "apis/<group>/<version>" -> {"serverRelativeURL": ...}
    openapi: dict[str, JSON] = field(default_factory=dict)


def legacy_to_aggregated(version: str, resource_list: JSON) -> JSON:
    """An APIResourceList as an APIVersionDiscovery (kube's ConvertGroupVersionIntoToDiscovery):
    top-level resources first, subresources under their parent."""
    resources: list[JSON] = []
    parents: dict[str, JSON] = {}
    listed = [r for r in resource_list.get("resources") or [] if isinstance(r, dict)]
    for r in listed:
        name = str(r.get("name", ""))
        if "/" in name:
            continue
        entry: JSON = {
            "resource": name,
            "responseKind": {
                "group": r.get("group", ""),
                "version": r.get("version", ""),
                "kind": r.get("kind", ""),
            },
            "scope": "Namespaced" if r.get("namespaced") else "Cluster",
            "singularResource": r.get("singularName", ""),
            "verbs": list(r.get("verbs") or []),
        }
        for key in ("shortNames", "categories"):
            if r.get(key):
                entry[key] = list(r[key])
        resources.append(entry)
        parents[name] = entry
    for r in listed:
        parent_name, slash, sub = str(r.get("name", "")).partition("/")
        if not slash:
            continue
        parent = parents.get(parent_name)
        if parent is None:
            parent = {
                "resource": parent_name,
                "responseKind": {},
                "scope": "Namespaced" if r.get("namespaced") else "Cluster",
            }
            resources.append(parent)
            parents[parent_name] = parent
        kind = r.get("kind", "")
        response_kind = (
            {"group": r.get("group", ""), "version": r.get("version", ""), "kind": kind}
            if kind
            else {}
        )
        parent.setdefault("subresources", []).append(
            {"subresource": sub, "responseKind": response_kind, "verbs": list(r.get("verbs") or [])}
        )
    return {"version": version, "resources": resources, "freshness": "Current"}


class DiscoveryCache:
    def __init__(self, proxy: BackendProxy) -> None:
        self.proxy = proxy
        self._cache: dict[tuple[str, str, int], _Cached] = {}

    @staticmethod
    def _key(backend: Backend) -> tuple[str, str, int]:
        return (backend.namespace, backend.service, backend.port)

    def version(self, backend: Backend, gv: GroupVersion) -> JSON:
        """The group version's APIVersionDiscovery as last known."""
        cached = self._cache.get(self._key(backend))
        entry = cached.versions.get(gv) if cached is not None else None
        if entry is None:
            return {"version": gv[1], "freshness": "Stale"}
        return {**entry, "freshness": "Stale" if cached and cached.stale else "Current"}

    def openapi_paths(self, backend: Backend) -> dict[str, JSON]:
        """The backend's OpenAPI v3 root entries, as last read."""
        cached = self._cache.get(self._key(backend))
        return dict(cached.openapi) if cached is not None else {}

    def forget(self, backend: Backend) -> None:
        self._cache.pop(self._key(backend), None)

    def mark_stale(self, backend: Backend) -> None:
        cached = self._cache.get(self._key(backend))
        if cached is not None:
            cached.stale = True

    async def refresh(self, backend: Backend, gv: GroupVersion) -> None:
        """Fetch the backend's discovery again; on failure what was known turns Stale."""
        cached = self._cache.setdefault(self._key(backend), _Cached())
        try:
            await self._fetch(backend, gv, cached)
        except (UnreachableError, httpx.HTTPError, ValueError) as exc:
            log.info("discovery of %s from %s failed: %s", gv, backend.server_name, exc)
            cached.stale = True
        try:
            status, root, _, _ = await self._get(backend, "/openapi/v3", "")
        except (UnreachableError, httpx.HTTPError, ValueError) as exc:
            log.info("OpenAPI v3 of %s failed: %s", backend.server_name, exc)
            return
        if status == 200 and isinstance(root.get("paths"), dict):
            cached.openapi = dict(root["paths"])

    async def _get(self, backend: Backend, path: str, etag: str) -> tuple[int, JSON, str, str]:
        headers = [("Accept", _ACCEPT), *proxy_headers(AGGREGATOR)]
        if etag:
            headers.append(("If-None-Match", etag))
        response = await self.proxy.send(backend, "GET", path, headers, verify=True)
        try:
            body = b"".join([c async for c in response.aiter_bytes()])
        finally:
            await response.aclose()
        parsed = json.loads(body) if response.status_code == 200 and body else {}
        content_type = response.headers.get("content-type", "")
        return response.status_code, parsed, content_type, response.headers.get("etag", "")

    async def _fetch(self, backend: Backend, gv: GroupVersion, cached: _Cached) -> None:
        status, document, content_type, etag = await self._get(backend, "/apis", cached.etag)
        if status == 304:
            cached.stale = False
            return
        if status == 200 and "g=apidiscovery.k8s.io" in content_type.replace(" ", ""):
            versions: dict[GroupVersion, JSON] = {}
            for item in document.get("items") or []:
                group = str((item.get("metadata") or {}).get("name") or "")
                for entry in item.get("versions") or []:
                    versions[(group, str(entry.get("version")))] = entry
            cached.versions, cached.etag, cached.stale = versions, etag, False
            return
        if status not in (200, 404, 406):
            raise ValueError(f"service {backend.namespace}/{backend.service} returned {status}")
        group, version = gv
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        status, listed, _, _ = await self._get(backend, path, "")
        if status != 200:
            raise ValueError(f"failed to download discovery for {path}: {status}")
        cached.versions = {gv: legacy_to_aggregated(version, listed)}
        cached.etag, cached.stale = "", False
