"""Request accounting: how many requests the emulator served, by verb, resource and user.

Registered as an ApiServer hook, so it sees every request that passed authentication
and authorization (and is counted before fault injection, so injected failures count
as calls the client made). Readable from tests and over HTTP at /_emulator/requests.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import errors
from .requestinfo import RequestAttributes
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

    async def hook(self, req: ApiRequest, attrs: RequestAttributes) -> None:
        self._counts[_key(req, attrs)] += 1

    def reset(self) -> None:
        self._counts.clear()

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
            row: dict[str, Any] = {"verb": key.verb, "user": key.user, "count": n}
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
