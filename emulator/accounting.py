"""Request accounting: how many requests the emulator served, by verb, resource and user, and
the bytes of their bodies each way.

Registered as an ApiServer hook, so it sees every request that passed authentication
and authorization (and is counted before fault injection, so injected failures count
as calls the client made); and as a response hook, for the size of each answer's body (a watch's
as it streams). Readable from tests and over HTTP at /_emulator/requests.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import errors
from .requestinfo import RequestAttributes
from .streams import wrapping
from .wire import ApiRequest, ApiResponse


@dataclass(frozen=True)
class ResourceSpec:
    """A resource as tests name it: "pods", "deployments.apps", "pods/status", "pods/*",
    "clusters.cluster.karmada.io/status" or "*".

    As in RBAC, "pods" names the resource itself, not its subresources. Without a group
    suffix the resource matches in any group; "pods" is taken to be the core group only
    when written "pods." (trailing dot).
    """

    resource: str
    group: str | None
    subresource: str

    @classmethod
    def parse(cls, spec: str) -> ResourceSpec:
        main, _, sub = spec.partition("/")
        resource, dot, group = main.partition(".")
        return cls(resource, group if dot else None, sub)

    def matches(self, group: str, resource: str, subresource: str) -> bool:
        if self.resource == "*":
            return True
        if self.resource != resource:
            return False
        if self.group is not None and self.group != group:
            return False
        return self.subresource == "*" or self.subresource == subresource

    def __str__(self) -> str:
        out = self.resource
        if self.group is not None:
            out += "." + self.group
        if self.subresource:
            out += "/" + self.subresource
        return out


class RequestKey(NamedTuple):
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    user: str
    # Only for non-resource requests (discovery, /version, /healthz); "" otherwise.
    path: str


def _key(req: ApiRequest, attrs: RequestAttributes) -> RequestKey:
    user = req.user.name if req.user is not None else ""
    if attrs.is_resource_request:
        return RequestKey(
            attrs.verb,
            attrs.api_group,
            attrs.resource,
            attrs.subresource,
            attrs.namespace,
            user,
            "",
        )
    return RequestKey(attrs.verb, "", "", "", "", user, attrs.path)


class Accounting:
    """Counts requests. `api.hooks.append(accounting.hook)` (before the faults hook)."""

    def __init__(self) -> None:
        self._counts: Counter[RequestKey] = Counter()
        self._bytes_in: Counter[RequestKey] = Counter()
        self._bytes_out: Counter[RequestKey] = Counter()
        # Watches asking for the current state first (sendInitialEvents, client-go's watch-list):
        # a list in all but name.
        self._initial_events: Counter[RequestKey] = Counter()

    async def hook(self, req: ApiRequest, attrs: RequestAttributes) -> None:
        key = _key(req, attrs)
        self._counts[key] += 1
        self._bytes_in[key] += len(req.body or b"")
        if attrs.verb == "watch" and req.param("sendInitialEvents") == "true":
            self._initial_events[key] += 1

    def response_hook(self, req: ApiRequest, response: ApiResponse) -> None:
        """Register with `api.response_hooks`: the bytes of the answer's body."""
        if not isinstance(req.attributes, RequestAttributes) or req.user is None:
            return
        key = _key(req, req.attributes)
        if key not in self._counts:
            return  # refused before the hooks (not a call counted here)
        self._bytes_out[key] += len(response.body)
        if response.stream is not None:
            response.stream = wrapping(self._counted(key, response.stream), response.stream)

    async def _counted(self, key: RequestKey, stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in stream:
            self._bytes_out[key] += len(chunk)
            yield chunk

    def reset(self) -> None:
        self._counts.clear()
        self._bytes_in.clear()
        self._bytes_out.clear()
        self._initial_events.clear()

    def counts(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        user: str | None = None,
        namespace: str | None = None,
        path: str | None = None,
    ) -> int:
        """Requests matching every given filter. `resource` takes a ResourceSpec string."""
        return sum(n for _, n in self._matching(verb, resource, user, namespace, path))

    def body_bytes(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        user: str | None = None,
        namespace: str | None = None,
        path: str | None = None,
    ) -> tuple[int, int]:
        """(request bytes, response bytes) of the bodies of the requests matching the filters."""
        keys = [key for key, _ in self._matching(verb, resource, user, namespace, path)]
        return sum(self._bytes_in[k] for k in keys), sum(self._bytes_out[k] for k in keys)

    def watches_opened(self, *, resource: str | None = None, user: str | None = None) -> int:
        return self.counts(verb="watch", resource=resource, user=user)

    def total(self) -> int:
        return sum(self._counts.values())

    def rows(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        user: str | None = None,
        namespace: str | None = None,
        path: str | None = None,
    ) -> list[dict[str, Any]]:
        rows = []
        for key, n in self._matching(verb, resource, user, namespace, path):
            row: dict[str, Any] = {
                "verb": key.verb,
                "user": key.user,
                "count": n,
                "requestBytes": self._bytes_in[key],
                "responseBytes": self._bytes_out[key],
            }
            if self._initial_events[key]:
                row["initialEvents"] = self._initial_events[key]
            if key.path:
                row["path"] = key.path
            else:
                row.update(
                    group=key.group,
                    resource=key.resource,
                    subresource=key.subresource,
                    namespace=key.namespace,
                )
            rows.append(row)
        rows.sort(key=lambda r: (-r["count"], r["verb"], r.get("resource", ""), r["user"]))
        return rows

    def _matching(
        self,
        verb: str | None,
        resource: str | None,
        user: str | None,
        namespace: str | None,
        path: str | None,
    ) -> list[tuple[RequestKey, int]]:
        spec = ResourceSpec.parse(resource) if resource is not None else None
        out = []
        for key, n in self._counts.items():
            if verb is not None and key.verb != verb:
                continue
            if user is not None and key.user != user:
                continue
            if namespace is not None and key.namespace != namespace:
                continue
            if path is not None and key.path != path:
                continue
            if spec is not None and (
                key.path or not spec.matches(key.group, key.resource, key.subresource)
            ):
                continue
            out.append((key, n))
        return out

    async def http(self, req: ApiRequest) -> ApiResponse:
        """GET /_emulator/requests[?verb=&resource=&user=&namespace=&path=], DELETE resets."""
        if req.path.rstrip("/") != "/_emulator/requests":
            return status_response(
                errors.ApiError(404, "NotFound", "the server could not find the requested resource")
            )
        if req.method == "DELETE":
            total = self.total()
            self.reset()
            return json_response(200, {"reset": True, "total": total})
        if req.method != "GET":
            return status_response(errors.method_not_allowed())
        filters = {
            name: req.param(name) for name in ("verb", "resource", "user", "namespace", "path")
        }
        rows = self.rows(**filters)
        return json_response(
            200,
            {
                "total": sum(r["count"] for r in rows),
                "watchStreams": sum(r["count"] for r in rows if r["verb"] == "watch"),
                "items": rows,
            },
        )


def json_response(code: int, body: Any) -> ApiResponse:
    return ApiResponse(code, json.dumps(body).encode(), {"Content-Type": "application/json"})


def status_response(err: errors.ApiError) -> ApiResponse:
    headers = {"Content-Type": "application/json", **err.headers}
    return ApiResponse(err.code, json.dumps(err.status()).encode(), headers)
