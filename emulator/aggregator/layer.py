"""The aggregation layer in front of the emulator's own API, as kube-aggregator is in front of
kube-apiserver.

APIService objects decide where a group version is served. A local one (no `spec.service`) is
this server's own; a remote one sends every request for its group version (resources and the
`/apis/<group>/<version>` discovery document) to its backend once the request has passed this
server's authentication and authorization, or answers 503 "service unavailable" while the
APIService is not Available. A group version the emulator serves itself stops being served here
while a remote APIService claims it (its types leave the registry, so discovery, OpenAPI and the
garbage collector no longer see them; its stored objects wait, untouched, and come back with
the types when the APIService goes).

Discovery is merged as kube-aggregator merges it: `/apis` lists every group in APIService order
(group priority, ties by APIService name), a remote group with the versions its APIServices name,
`/apis/<group>` of such a group is answered from the APIServices, and the aggregated discovery
document carries the remote group versions as last fetched from their backends
(`documents.DiscoveryCache`). OpenAPI v3 too: the `/openapi/v3` root lists the remote group
versions where their backends serve them, and their documents are fetched from there.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from ..discovery import aggregated_group, api_group
from ..registry import JSON, Registry, ResourceType
from ..services import ServiceNetwork
from ..storage import Event, Storage
from ..wire import ApiRequest, ApiResponse
from . import apiservice
from .documents import DiscoveryCache
from .proxy import Backend, BackendProxy, text_response

log = logging.getLogger(__name__)

GR = (apiservice.GROUP, apiservice.RESOURCE)
GroupVersion = tuple[str, str]


@dataclass(frozen=True)
class Remote:
    """A group version served by a backend, and whether it may be reached now."""

    backend: Backend
    available: bool


class Aggregator:
    def __init__(
        self,
        registry: Registry,
        storage: Storage,
        services: ServiceNetwork,
        front_proxy_client: tuple[bytes, bytes],
    ) -> None:
        self.registry = registry
        self.storage = storage
        self.proxy = BackendProxy(services, front_proxy_client)
        self.documents = DiscoveryCache(self.proxy)
        self.remote: dict[GroupVersion, Remote] = {}
        # Local types set aside while a remote APIService claims their group version.
        self._shadowed: dict[GroupVersion, list[ResourceType]] = {}
        self._changed: asyncio.Event | None = None
        registry.register(apiservice.resource_type())
        storage.listeners.append(self._on_event)
        self._recompute()

    # --- state ----------------------------------------------------------------------------

    def apiservices(self) -> list[JSON]:
        return self.storage.list(GR, None)

    def _on_event(self, gr: tuple[str, str], _ev: Event) -> None:
        if gr == GR:
            self._recompute()

    def _recompute(self) -> None:
        remote: dict[GroupVersion, Remote] = {}
        for obj in self.apiservices():
            backend = Backend.of(obj)
            if backend is not None:
                remote[apiservice.group_version(obj)] = Remote(
                    backend, apiservice.is_available(obj)
                )
        for gv, old in self.remote.items():
            if gv not in remote or remote[gv].backend != old.backend:
                self.documents.forget(old.backend)
        changed = set(remote) != set(self.remote)
        self.remote = remote
        for gv in remote:
            self._shadow(gv)
        for gv in [gv for gv in self._shadowed if gv not in remote]:
            for rt in self._shadowed.pop(gv):
                self.registry.register(rt)
            log.info("%s/%s is served by this server again", *gv)
        if changed and self._changed is not None:
            self._changed.set()
            self._changed = None

    def _shadow(self, gv: GroupVersion) -> None:
        local = self.registry.resources(*gv)
        if not local:
            return
        self._shadowed.setdefault(gv, []).extend(local)
        for rt in local:
            self.registry.unregister(rt.group, rt.version, rt.resource)
        log.info("%s/%s is served by an aggregated API server now", *gv)

    def served_remotely(self, group: str, version: str) -> bool:
        return (group, version) in self.remote

    async def changed(self) -> None:
        """Return once the set of remotely served group versions changes."""
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    # --- requests -------------------------------------------------------------------------

    async def route(self, req: ApiRequest) -> ApiResponse | None:
        """The answer for a request of a remotely served group version (its resources, its
        discovery, its OpenAPI v3 document); None for the rest."""
        segments = [s for s in req.path.split("/") if s]
        if segments[:2] == ["openapi", "v3"]:
            segments = segments[2:]  # a group version's document: /openapi/v3/apis/<g>/<v>
        if len(segments) < 3 or segments[0] != "apis":
            return None
        remote = self.remote.get((segments[1], segments[2]))
        if remote is None:
            return None
        if not remote.available:
            return text_response(503, "service unavailable")
        assert req.user is not None
        return await self.proxy.forward(req, req.user, remote.backend)

    # --- discovery ------------------------------------------------------------------------

    def _priority(self, group: str, version: str) -> tuple[int, str]:
        name = apiservice.name_of(group, version)
        obj = self.storage.get(GR, "", name)
        if obj is not None:
            return int(apiservice.spec_of(obj).get("groupPriorityMinimum") or 0), name
        return apiservice.priorities(group, version)[0], name

    def group_order(self) -> list[str]:
        """Every group to list under /apis, in kube-aggregator's order."""
        keys: dict[str, tuple[int, str]] = {}

        def consider(group: str, version: str) -> None:
            priority, name = self._priority(group, version)
            best = keys.get(group)
            if best is None or (-priority, name) < (-best[0], best[1]):
                keys[group] = (priority, name)

        for group in self.registry.groups():
            for version in self.registry.versions(group):
                if group:
                    consider(group, version)
        for group, version in self.remote:
            if group:
                consider(group, version)
        return sorted(keys, key=lambda g: (-keys[g][0], keys[g][1]))

    def _group_apiservices(self, group: str) -> list[JSON]:
        members = [s for s in self.apiservices() if apiservice.group_version(s)[0] == group]
        ordered = apiservice.sorted_by_group_and_version(members)
        return ordered[0] if ordered else []

    def api_group(self, group: str) -> JSON | None:
        """The APIGroup of a group with remotely served versions; None for a local group."""
        if not any(g == group for g, _ in self.remote):
            return None
        versions = [
            {"groupVersion": f"{group}/{v}", "version": v}
            for v in (apiservice.group_version(s)[1] for s in self._group_apiservices(group))
        ]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    def aggregated_group(self, group: str) -> JSON | None:
        """The aggregated discovery entry of a group with remotely served versions."""
        if not any(g == group for g, _ in self.remote):
            return None
        local = {v["version"]: v for v in aggregated_group(self.registry, group)["versions"]}
        versions = []
        for obj in self._group_apiservices(group):
            version = apiservice.group_version(obj)[1]
            remote = self.remote.get((group, version))
            if remote is not None:
                versions.append(self.documents.version(remote.backend, (group, version)))
            elif version in local:
                versions.append(local[version])
        return {"metadata": {"name": group, "creationTimestamp": None}, "versions": versions}

    def api_group_or_local(self, group: str) -> JSON:
        return self.api_group(group) or api_group(self.registry, group)

    def aggregated_group_or_local(self, group: str) -> JSON:
        return self.aggregated_group(group) or aggregated_group(self.registry, group)

    def openapi_root(self, local: ApiResponse) -> ApiResponse:
        """The local /openapi/v3 root with the remotely served group versions added."""
        if local.status != 200 or not self.remote:
            return local
        root = json.loads(local.body)
        paths: dict[str, JSON] = root.setdefault("paths", {})
        for (group, version), remote in self.remote.items():
            key = f"apis/{group}/{version}"
            entry = self.documents.openapi_paths(remote.backend).get(key)
            if entry is not None:
                paths[key] = entry
        root["paths"] = dict(sorted(paths.items()))
        return ApiResponse(200, json.dumps(root).encode(), dict(local.headers))

    # --- lifecycle ------------------------------------------------------------------------

    async def aclose(self) -> None:
        await self.proxy.aclose()
