"""Discovery: a RESTMapper (kind -> resource) and the server's groups/resources listing.

Aggregated discovery (apidiscovery.k8s.io/v2, one request each for /api and /apis) is asked for
first; servers that answer with the legacy APIVersions/APIGroupList get the per-version requests.
With a `DiscoveryCache`, the aggregated documents are asked for with If-None-Match and a 304
Not Modified reuses the document already parsed (kube-apiserver serves them with an ETag), so a
periodic discovery of an unchanged server costs two empty answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.kube.client import GVR, KubeClient
from agent.kube.errors import KubeError, from_response
from agent.logs import get_logger

log = get_logger(__name__)

JsonDict = dict[str, Any]

AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


class NoKindMatchError(KubeError):
    """The server serves no resource for this group/version/kind."""


@dataclass(frozen=True)
class ResourceInfo:
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()

    @property
    def gvr(self) -> GVR:
        return GVR(self.group, self.version, self.resource)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass
class DiscoveryResult:
    """Every served group version with its top-level resources; `failed` maps group versions
    whose resources could not be read to the reason."""

    resources: dict[str, list[ResourceInfo]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def _split(group_version: str) -> tuple[str, str]:
    group, _, version = group_version.rpartition("/")
    return group, version


def _from_aggregated(document: JsonDict, result: DiscoveryResult) -> None:
    for group_entry in document.get("items") or []:
        group = str((group_entry.get("metadata") or {}).get("name") or "")
        for version_entry in group_entry.get("versions") or []:
            version = str(version_entry.get("version") or "")
            group_version = f"{group}/{version}" if group else version
            if version_entry.get("freshness") == "Stale":
                # As client-go: the API server could not read it (its APIService unavailable);
                # what it lists, if anything, is not served now, so none of it is used.
                result.failed[group_version] = "stale discovery document"
                continue
            infos: list[ResourceInfo] = []
            for res in version_entry.get("resources") or []:
                kind_info = res.get("responseKind") or {}
                subresources = tuple(
                    str(s.get("subresource")) for s in res.get("subresources") or []
                )
                infos.append(
                    ResourceInfo(
                        group=group,
                        version=version,
                        resource=str(res.get("resource") or ""),
                        kind=str(kind_info.get("kind") or ""),
                        namespaced=res.get("scope") == "Namespaced",
                        verbs=tuple(res.get("verbs") or ()),
                        short_names=tuple(res.get("shortNames") or ()),
                        subresources=subresources,
                    )
                )
            result.resources[group_version] = infos


def _from_resource_list(group_version: str, document: JsonDict) -> list[ResourceInfo]:
    group, version = _split(group_version)
    top: dict[str, ResourceInfo] = {}
    subs: dict[str, list[str]] = {}
    for res in document.get("resources") or []:
        name = str(res.get("name") or "")
        if "/" in name:
            parent, _, sub = name.partition("/")
            subs.setdefault(parent, []).append(sub)
            continue
        top[name] = ResourceInfo(
            group=group,
            version=version,
            resource=name,
            kind=str(res.get("kind") or ""),
            namespaced=bool(res.get("namespaced")),
            verbs=tuple(res.get("verbs") or ()),
            short_names=tuple(res.get("shortNames") or ()),
        )
    return [
        ResourceInfo(**{**info.__dict__, "subresources": tuple(subs.get(name, ()))})
        for name, info in top.items()
    ]


@dataclass
class DiscoveryCache:
    """The last aggregated document per root path and its ETag."""

    documents: dict[str, tuple[str, JsonDict]] = field(default_factory=dict)
    not_modified: int = 0


async def _root_document(client: KubeClient, root: str, cache: DiscoveryCache | None) -> Any:
    if cache is None:
        return await client.get_json(root, accept=AGGREGATED_ACCEPT)
    known = cache.documents.get(root)
    headers = {"If-None-Match": known[0]} if known is not None else None
    response = await client.raw_get(root, accept=AGGREGATED_ACCEPT, headers=headers)
    if response.status == 304 and known is not None:
        cache.not_modified += 1
        return known[1]
    if not response.ok:
        raise from_response(response.status, response.content, response.headers)
    document = response.json()
    etag = response.headers.get("etag")
    if etag and isinstance(document, dict) and document.get("kind") == "APIGroupDiscoveryList":
        cache.documents[root] = (etag, document)
    else:
        cache.documents.pop(root, None)
    return document


async def discover(client: KubeClient, cache: DiscoveryCache | None = None) -> DiscoveryResult:
    """All groups, versions and resources the server serves (partial results kept)."""
    result = DiscoveryResult()
    legacy_versions: list[str] = []
    for root in ("/api", "/apis"):
        document = await _root_document(client, root, cache)
        if not isinstance(document, dict):
            raise KubeError(f"{root}: expected a JSON object")
        if document.get("kind") == "APIGroupDiscoveryList":
            _from_aggregated(document, result)
        elif root == "/api":
            legacy_versions.extend(str(v) for v in document.get("versions") or [])
        else:
            for group in document.get("groups") or []:
                for version in group.get("versions") or []:
                    legacy_versions.append(str(version.get("groupVersion")))
    if legacy_versions:

        async def fetch(group_version: str) -> None:
            path = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
            try:
                document = await client.get_json(path)
            except KubeError as exc:
                result.failed[group_version] = str(exc)
                return
            result.resources[group_version] = _from_resource_list(group_version, document)

        await asyncio.gather(*(fetch(gv) for gv in legacy_versions))
    return result


def api_enablements(result: DiscoveryResult) -> list[JsonDict]:
    """Karmada's Cluster status.apiEnablements: one entry per group version with resources
    {name, kind} sorted by name (subresources left out), entries sorted by group version.
    Group versions whose discovery failed (an unavailable APIService: 503, or Stale in the
    aggregated document) are left out, as upstream's ServerGroupsAndResources leaves them."""
    entries: list[JsonDict] = []
    for group_version, infos in result.resources.items():
        resources = sorted(
            ({"name": info.resource, "kind": info.kind} for info in infos),
            key=lambda r: r["name"],
        )
        entries.append({"groupVersion": group_version, "resources": resources})
    entries.sort(key=lambda e: str(e["groupVersion"]))
    return entries


class RESTMapper:
    """Maps (apiVersion, kind) to the served resource. Refreshes discovery on a miss (CRDs appear
    later), at most once per `min_refresh_interval` seconds for the same unknown kind."""

    def __init__(self, client: KubeClient, *, min_refresh_interval: float = 1.0) -> None:
        self._client = client
        self._by_kind: dict[tuple[str, str, str], ResourceInfo] = {}
        self._by_resource: dict[tuple[str, str, str], ResourceInfo] = {}
        self._loaded = False
        self._lock = asyncio.Lock()
        self._last_refresh = float("-inf")
        self._min_refresh_interval = min_refresh_interval
        self._refresh_listeners: list[Callable[[], None]] = []
        self.refreshes = 0

    async def refresh(self) -> DiscoveryResult:
        result = await discover(self._client)
        by_kind: dict[tuple[str, str, str], ResourceInfo] = {}
        by_resource: dict[tuple[str, str, str], ResourceInfo] = {}
        for infos in result.resources.values():
            for info in infos:
                by_kind[(info.group, info.version, info.kind)] = info
                by_resource[(info.group, info.version, info.resource)] = info
        self._by_kind, self._by_resource = by_kind, by_resource
        self._loaded = True
        self._last_refresh = asyncio.get_running_loop().time()
        self.refreshes += 1
        for listener in list(self._refresh_listeners):
            listener()
        return result

    def on_refresh(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` after every refresh of discovery (kinds may have come); returns
        the function that removes it."""
        self._refresh_listeners.append(listener)

        def remove() -> None:
            if listener in self._refresh_listeners:
                self._refresh_listeners.remove(listener)

        return remove

    def invalidate(self) -> None:
        self._loaded = False

    async def _lookup(self, table: str, key: tuple[str, str, str], describe: str) -> ResourceInfo:
        def find() -> ResourceInfo | None:
            mapping = self._by_kind if table == "kind" else self._by_resource
            return mapping.get(key)

        info = find() if self._loaded else None
        if info is not None:
            return info
        async with self._lock:
            info = find() if self._loaded else None
            if info is not None:
                return info
            now = asyncio.get_running_loop().time()
            if not self._loaded or now - self._last_refresh >= self._min_refresh_interval:
                await self.refresh()
            info = find()
        if info is None:
            raise NoKindMatchError(f"no matches for {describe}")
        return info

    async def resource_for(self, api_version: str, kind: str) -> ResourceInfo:
        group, version = _split(api_version)
        # client-go's NoKindMatchError wording.
        return await self._lookup(
            "kind", (group, version, kind), f'kind "{kind}" in version "{api_version}"'
        )

    async def info_for(self, gvr: GVR) -> ResourceInfo:
        return await self._lookup(
            "resource", (gvr.group, gvr.version, gvr.resource), f"resource {gvr}"
        )
