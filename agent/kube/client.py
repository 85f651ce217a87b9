"""REST verbs on plain dicts over `Transport`: get, list (paged), create, replace, update_status,
patch (json, merge, strategic, apply), delete, watch, non-resource GETs and the server version."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from agent.kube.errors import ExpiredError, KubeError, check_path_segment
from agent.kube.managed_fields import take_over_patch
from agent.kube.transport import Response, Transport
from agent.logs import get_logger

log = get_logger(__name__)

JsonDict = dict[str, Any]
# kube-apiserver answers a request accepting this with the object's metadata only.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PatchType = Literal["json", "merge", "strategic", "apply"]

PATCH_CONTENT_TYPES: dict[str, str] = {
    "json": "application/json-patch+json",
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}

DEFAULT_PAGE_SIZE = 500
# Margin added to a watch's timeoutSeconds for the client read timeout: the server ends the
# stream at timeoutSeconds, so a longer silence means the connection is dead.
WATCH_READ_MARGIN = 30.0


@dataclass(frozen=True, slots=True)
class GVR:
    """A resource: group ("" for core), version and plural resource name."""

    group: str
    version: str
    resource: str

    @classmethod
    def of(cls, api_version: str, resource: str) -> GVR:
        group, _, version = api_version.rpartition("/")
        return cls(group, version, resource)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if namespace:
            parts.append(f"namespaces/{_segment('metadata.namespace', namespace)}")
        parts.append(self.resource)
        if name is not None:
            if not name:
                raise ValueError("resource name must not be empty")
            parts.append(_segment("metadata.name", name))
        if subresource:
            if name is None:
                raise ValueError("a subresource needs a name")
            parts.append(subresource)
        return "/".join(parts)

    def __str__(self) -> str:
        return f"{self.api_version}/{self.resource}"


def _segment(field: str, value: str) -> str:
    """One path segment, validated as kube-apiserver validates names in paths, then escaped."""
    return quote(check_path_segment(field, value), safe="")


def _dry_run(params: dict[str, str], dry_run: bool) -> None:
    if dry_run:
        params["dryRun"] = "All"


def _body(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True)
class ListPage:
    body: JsonDict
    # The list started over in full (its continue token expired): drop the earlier pages.
    restarted: bool = False


class KubeClient:
    """A small async client; every method works on dicts and raises agent.kube.errors types."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def close(self) -> None:
        await self.transport.close()

    # --- plumbing ------------------------------------------------------------------------------

    async def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        accept: str = "application/json",
    ) -> JsonDict:
        response = await self.transport.request(
            method,
            path,
            params=params,
            body=_body(body) if body is not None else None,
            content_type=content_type if body is not None else None,
            timeout=timeout,
            accept=accept,
        )
        self._warnings(response)
        data = response.json()
        if not isinstance(data, dict):
            raise KubeError(f"{method} {path}: expected a JSON object")
        return data

    @staticmethod
    def _warnings(response: Response) -> None:
        warning = response.headers.get("warning")
        if warning:
            log.warning("API server warning on %s %s: %s", response.method, response.url, warning)

    # --- reads ---------------------------------------------------------------------------------

    async def get(
        self,
        gvr: GVR,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        metadata_only: bool = False,
    ) -> JsonDict:
        """The object; with `metadata_only`, its metadata only (a PartialObjectMetadata)."""
        return await self._json(
            "GET",
            gvr.path(namespace, name, subresource),
            accept=METADATA_ONLY if metadata_only else "application/json",
        )

    async def list_pages(
        self,
        gvr: GVR,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = DEFAULT_PAGE_SIZE,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> AsyncIterator[ListPage]:
        """Each page of a list, following `continue` tokens. If a continue token expires
        mid-way, the list restarts once without paging (as client-go's pager does); that page
        comes with `restarted` set, and the pages before it must be discarded."""
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if resource_version_match:
            params["resourceVersionMatch"] = resource_version_match
        if limit:
            params["limit"] = str(limit)
        path = gvr.path(namespace)
        continue_token = ""
        while True:
            page_params = dict(params)
            if continue_token:
                page_params["continue"] = continue_token
                # resourceVersion must not accompany a continue token.
                page_params.pop("resourceVersion", None)
                page_params.pop("resourceVersionMatch", None)
            try:
                page = await self._json("GET", path, params=page_params)
            except ExpiredError:
                if not continue_token:
                    raise
                log.info("continue token expired listing %s; listing in full", gvr)
                full = {k: v for k, v in params.items() if k != "limit"}
                yield ListPage(await self._json("GET", path, params=full), restarted=True)
                return
            yield ListPage(page)
            continue_token = str((page.get("metadata") or {}).get("continue") or "")
            if not continue_token:
                return

    async def list(
        self,
        gvr: GVR,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = DEFAULT_PAGE_SIZE,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> JsonDict:
        """The whole list, pages joined; metadata.resourceVersion is the last page's."""
        merged: JsonDict | None = None
        items: list[JsonDict] = []
        async for page in self.list_pages(
            gvr,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
        ):
            if page.restarted:
                items.clear()
            items.extend(page.body.get("items") or [])
            if merged is None:
                merged = {k: v for k, v in page.body.items() if k != "items"}
            merged["metadata"] = {
                k: v for k, v in (page.body.get("metadata") or {}).items() if k != "continue"
            }
        assert merged is not None
        merged["items"] = items
        return merged

    # --- writes --------------------------------------------------------------------------------

    @staticmethod
    def _write_params(
        dry_run: bool, field_manager: str | None, field_validation: str | None
    ) -> dict[str, str]:
        params: dict[str, str] = {}
        _dry_run(params, dry_run)
        if field_manager:
            params["fieldManager"] = field_manager
        if field_validation:
            params["fieldValidation"] = field_validation
        return params

    async def create(
        self,
        gvr: GVR,
        body: JsonDict,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        name: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> JsonDict:
        """POST to the collection (or to `name/subresource`, e.g. a token request)."""
        if namespace is None:
            namespace = (body.get("metadata") or {}).get("namespace")
        path = gvr.path(namespace, name, subresource) if subresource else gvr.path(namespace)
        params = self._write_params(dry_run, field_manager, field_validation)
        return await self._json("POST", path, params=params, body=body)

    async def replace(
        self,
        gvr: GVR,
        body: JsonDict,
        *,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> JsonDict:
        """PUT the whole object; name and namespace default to the body's metadata. Send
        metadata.resourceVersion for optimistic concurrency (409 Conflict when stale)."""
        meta = body.get("metadata") or {}
        name = name or meta.get("name")
        if not name:
            raise ValueError("replace needs a name")
        if namespace is None:
            namespace = meta.get("namespace")
        params = self._write_params(dry_run, field_manager, field_validation)
        path = gvr.path(namespace, name, subresource)
        return await self._json("PUT", path, params=params, body=body)

    async def update_status(
        self,
        gvr: GVR,
        body: JsonDict,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> JsonDict:
        return await self.replace(
            gvr,
            body,
            namespace=namespace,
            subresource="status",
            dry_run=dry_run,
            field_manager=field_manager,
        )

    async def patch(
        self,
        gvr: GVR,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = "merge",
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
        field_validation: str | None = None,
        metadata_only: bool = False,
    ) -> JsonDict:
        """PATCH with the given type. For "apply", `field_manager` is required by the server and
        `force=True` takes fields over from other managers. With `metadata_only` the server
        answers with the object's metadata only (a PartialObjectMetadata): for a writer that
        knows the rest, on a link where every byte counts."""
        params = self._write_params(dry_run, field_manager, field_validation)
        if force is not None:
            params["force"] = "true" if force else "false"
        return await self._json(
            "PATCH",
            gvr.path(namespace, name, subresource),
            params=params,
            body=patch,
            content_type=PATCH_CONTENT_TYPES[patch_type],
            accept=METADATA_ONLY if metadata_only else "application/json",
        )

    async def apply(
        self,
        gvr: GVR,
        body: JsonDict,
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str | None = None,
        take_over_from: Collection[str] = (),
    ) -> JsonDict:
        """Server-side apply of a (partial) object; name and namespace from its metadata.

        `take_over_from`: managers whose `Update` entries in managedFields (writes with PUT or
        create) are merged into this field manager's entry once the apply shows them, and the
        object is applied again, so that fields this configuration leaves out are removed
        although those managers wrote them (agent.kube.managed_fields)."""
        meta = body.get("metadata") or {}
        if namespace is None:
            namespace = meta.get("namespace")
        name = str(meta.get("name") or "")

        async def apply(config: JsonDict) -> JsonDict:
            return await self.patch(
                gvr,
                name,
                config,
                patch_type="apply",
                namespace=namespace,
                subresource=subresource,
                field_manager=field_manager,
                force=force,
                dry_run=dry_run,
                field_validation=field_validation,
            )

        applied = await apply(body)
        if not take_over_from or dry_run or subresource:
            return applied
        patch = take_over_patch(applied, from_managers=take_over_from, to_manager=field_manager)
        if patch is None:
            return applied
        try:
            taken = await self.patch(gvr, name, patch, patch_type="json", namespace=namespace)
        except KubeError as exc:
            # Changed meanwhile (the resourceVersion test failed) or refused: the next apply
            # shows the entries again and tries again.
            log.debug("taking over the fields of %s not done: %s", sorted(take_over_from), exc)
            return applied
        log.info(
            "took over the fields %s wrote to %s %s/%s",
            ", ".join(sorted(take_over_from)),
            gvr.resource,
            namespace or "",
            name,
        )
        if meta.get("resourceVersion"):
            # The configuration was made from the version the first apply found; the take-over
            # changed only managedFields since.
            version = (taken.get("metadata") or {}).get("resourceVersion")
            body = {**body, "metadata": {**meta, "resourceVersion": version}}
        return await apply(body)

    async def delete(
        self,
        gvr: GVR,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, str] | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> JsonDict:
        """DELETE with DeleteOptions. Returns the object (when finalizers keep it) or a Status.
        `preconditions` takes "uid" and/or "resourceVersion"."""
        options: JsonDict = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        return await self._json("DELETE", gvr.path(namespace, name), body=options)

    # --- watch ---------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def watch(
        self,
        gvr: GVR,
        *,
        namespace: str | None = None,
        name: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_watch_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        send_initial_events: bool | None = None,
        read_timeout: float | None = None,
    ) -> AsyncIterator[AsyncIterator[JsonDict]]:
        """`async with client.watch(...) as events: async for event in events:` yields
        {"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}}. ERROR events carry a
        Status (see errors.from_status); the iterator ends when the server closes the stream."""
        params: dict[str, str] = {"watch": "true"}
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if resource_version_match:
            params["resourceVersionMatch"] = resource_version_match
        if allow_watch_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(timeout_seconds)
            if read_timeout is None:
                read_timeout = timeout_seconds + WATCH_READ_MARGIN
        if send_initial_events is not None:
            params["sendInitialEvents"] = "true" if send_initial_events else "false"
        selectors = [field_selector] if field_selector else []
        if name is not None:
            selectors.append(f"metadata.name={name}")
        if selectors:
            params["fieldSelector"] = ",".join(selectors)
        if label_selector:
            params["labelSelector"] = label_selector
        async with self.transport.stream(
            "GET", gvr.path(namespace), params=params, read_timeout=read_timeout
        ) as stream:
            yield _decode_events(stream.lines())

    # --- non-resource paths --------------------------------------------------------------------

    async def raw_get(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json, */*",
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """GET any path (/readyz, /healthz, /version, /openapi/v2 ...) without raising on error
        statuses; transport failures still raise TransportError."""
        return await self.transport.request(
            "GET",
            path,
            params=params,
            accept=accept,
            timeout=timeout,
            raise_for_status=False,
            headers=headers,
        )

    async def get_json(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
    ) -> Any:
        """GET any path and decode JSON; error statuses raise."""
        response = await self.transport.request("GET", path, params=params, accept=accept)
        return response.json()

    async def server_version(self) -> JsonDict:
        data = await self.get_json("/version")
        if not isinstance(data, dict):
            raise KubeError("/version: expected a JSON object")
        return data


async def _decode_events(lines: AsyncIterator[bytes]) -> AsyncIterator[JsonDict]:
    async for line in lines:
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise KubeError(f"malformed watch event: {line[:200]!r}") from exc
        if not isinstance(event, dict) or "type" not in event:
            raise KubeError(f"malformed watch event: {line[:200]!r}")
        yield event
