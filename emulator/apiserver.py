"""ApiServer: kube-apiserver's request chain over the emulator's storage.

authenticate -> parse request info -> authorize -> request hooks (faults,
accounting) -> discovery / OpenAPI / reviews / REST handlers. `handle` never
raises: every failure becomes a metav1.Status response.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from email.utils import formatdate
from typing import TYPE_CHECKING, Any

from . import discovery, errors, partial
from .admission import WebhookAdmission
from .builtin import builtin_types
from .crd import CrdController, CrdSchema
from .errors import ApiError
from .gc import GarbageCollector
from .handlers import Backend, Handlers, PatchEngines, ServerConfig, WriteCtx
from .handlers.body import parse_body
from .handlers.context import write_ctx
from .handlers.delete import delete_options
from .impersonation import has_impersonation, impersonate
from .local import LocalClient
from .rbac import forbidden_for
from .registry import JSON, Registry, ResourceType
from .requestinfo import RequestAttributes, parse_request_info
from .services import ServiceNetwork
from .storage import Storage
from .webhook_call import WebhookClient
from .wire import SYSTEM_ADMIN, ApiRequest, ApiResponse, UserInfo

if TYPE_CHECKING:
    from .aggregator import Aggregator

log = logging.getLogger(__name__)

Hook = Callable[[ApiRequest, RequestAttributes], Awaitable[None]]
# A review kind's answer: (request body, requesting user) -> response object.
ReviewFn = Callable[[JSON, UserInfo], JSON | Awaitable[JSON]]
# A custom subresource (e.g. serviceaccounts/token): (server, request, attrs, type) -> response.
SubresourceFn = Callable[
    ["ApiServer", ApiRequest, RequestAttributes, ResourceType], Awaitable[ApiResponse]
]
OpenApiFn = Callable[[Registry, ApiRequest], ApiResponse]

_dumps = json.JSONEncoder(separators=(",", ":")).encode
NOT_FOUND_MESSAGE = "the server could not find the requested resource"

# kube-apiserver's MaxRequestBodyBytes (twice etcd's 1.5 MiB, for JSON-to-protobuf growth).
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def error_response(exc: ApiError) -> ApiResponse:
    body = exc.status()
    cont = getattr(exc, "list_continue", None)
    if cont:
        body["metadata"] = {"continue": cont}
    headers = {"content-type": "application/json", **exc.headers}
    return ApiResponse(exc.code, _dumps(body).encode(), headers)


class ApiServer:
    def __init__(
        self,
        *,
        registry: Registry | None = None,
        storage: Storage | None = None,
        authenticator: Any = None,
        authorizer: Any = None,
        ca: Any = None,
        openapi: OpenApiFn | None = None,
        reviews: Mapping[tuple[str, str], ReviewFn] | None = None,
        builtin_schema: Callable[[str, str, str], Any] | None = None,
        crd_schema: CrdSchema | None = None,
        engines: PatchEngines | None = None,
        config: ServerConfig | None = None,
        history_size: int = 10000,
        version: JSON | None = None,
        host: str = "127.0.0.1:6443",
        types: list[ResourceType] | None = None,
        fixed_uids: Mapping[tuple[str, str, str, str], str] | None = None,
    ) -> None:
        self.registry = registry or Registry()
        if registry is None:
            for rt in types if types is not None else builtin_types(builtin_schema):
                self.registry.register(rt)
        self.storage = storage or Storage(history_size)
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.ca = ca
        self.openapi = openapi
        self.reviews: dict[tuple[str, str], ReviewFn] = dict(reviews or {})
        self.subresource_handlers: dict[tuple[str, str, str], SubresourceFn] = {}
        self.hooks: list[Hook] = []
        # Told of every answer to a request that got past authentication (accounting).
        self.response_hooks: list[Callable[[ApiRequest, ApiResponse], None]] = []
        self.config = config or ServerConfig()
        # Where Services are reached (webhooks, aggregated API servers): no cluster network.
        self.services = ServiceNetwork()
        self.admission = WebhookAdmission(self.registry, self.storage, WebhookClient(self.services))
        self.handlers = Handlers(
            Backend(
                self.registry, self.storage, self.config, engines,
                admission=self.admission, fixed_uids=fixed_uids,
            )
        )  # fmt: skip
        self.gc = GarbageCollector(self.registry, self.storage, self.handlers)
        self.crds = CrdController(self.registry, self.storage, self.handlers, crd_schema)
        self.version = version
        self.host = host
        # The aggregation layer in front (emulator.aggregator), when there is one.
        self.aggregator: Aggregator | None = None

    # ------------------------------------------------------------------ public API

    def register_type(self, rt: ResourceType, *, preferred: bool = False) -> None:
        self.registry.register(rt, preferred=preferred)

    def add_subresource(self, group: str, resource: str, sub: str, fn: SubresourceFn) -> None:
        """Serve a custom subresource on every version of (group, resource)."""
        self.subresource_handlers[(group, resource, sub)] = fn
        for rt in self.registry.all():
            if rt.group_resource == (group, resource) and sub not in rt.subresources:
                rt.subresources = (*rt.subresources, sub)
        self.registry.changes += 1

    def loopback(self, user: UserInfo = SYSTEM_ADMIN) -> LocalClient:
        return LocalClient(self, user)

    def close(self) -> None:
        """End every open watch stream (server stopping)."""
        self.storage.close_all_watches()

    async def handle(self, req: ApiRequest) -> ApiResponse:
        try:
            response = await self._handle(req)
        except ApiError as exc:
            response = error_response(exc)
        except Exception as exc:  # the chain must answer, as kube-apiserver's panic filter
            log.exception("internal error serving %s %s", req.method, req.path)
            response = error_response(errors.internal(repr(exc)))
        response = partial.transform(req, response)
        # Go's HTTP server dates every answer (RFC 7231, whole seconds), by the server's clock.
        response.headers.setdefault("date", formatdate(self.config.clock(), usegmt=True))
        for observe in list(self.response_hooks):
            observe(req, response)
        return response

    # ------------------------------------------------------------------ chain

    async def _handle(self, req: ApiRequest) -> ApiResponse:
        if req.user is None:
            if self.authenticator is not None:
                req.user = await _maybe_await(self.authenticator.authenticate(req))
            else:
                req.user = SYSTEM_ADMIN
        if self.authorizer is not None and has_impersonation(req):
            req.user = impersonate(req, req.user, self.authorizer)
        user = req.user
        assert user is not None
        attrs = req.attributes = parse_request_info(req)
        if self.authorizer is not None:
            allowed, reason = await _maybe_await(self.authorizer.authorize(user, attrs))
            if not allowed:
                raise forbidden_for(user.name, attrs, reason)
        for hook in list(self.hooks):
            await hook(req, attrs)
        if self.aggregator is not None:
            routed = await self.aggregator.route(req)
            if routed is not None:
                return routed
        if not attrs.is_resource_request:
            return self._non_resource(req)
        return await self._resource(req, attrs)

    def _non_resource(self, req: ApiRequest) -> ApiResponse:
        path = req.path.rstrip("/") or "/"
        if path == "/version":
            return discovery.version_response(self.version)
        health = discovery.health_response(req)
        if health is not None:
            return health
        if path.startswith("/openapi/") and self.openapi is not None:
            served = self.openapi(self.registry, req)
            if path == "/openapi/v3" and self.aggregator is not None:
                return self.aggregator.openapi_root(served)
            return served
        found = discovery.discovery_response(self.registry, req, self.host, self.aggregator)
        if found is not None:
            return found
        if path.startswith(("/api", "/apis")):
            raise ApiError(404, "NotFound", NOT_FOUND_MESSAGE, {})
        return ApiResponse(
            404, b"404 page not found\n", {"content-type": "text/plain; charset=utf-8"}
        )

    async def _resource(self, req: ApiRequest, attrs: RequestAttributes) -> ApiResponse:
        rt = self.registry.lookup(attrs.api_group, attrs.api_version, attrs.resource)
        if rt is None:
            raise ApiError(404, "NotFound", NOT_FOUND_MESSAGE, {})
        is_ns = rt.group_resource == ("", "namespaces")
        ns = "" if is_ns else attrs.namespace
        name = attrs.name
        verb = attrs.verb
        sub = attrs.subresource
        if not is_ns:
            if rt.namespaced and not ns and verb not in ("list", "watch"):
                raise ApiError(404, "NotFound", NOT_FOUND_MESSAGE, {})
            if not rt.namespaced and ns:
                raise ApiError(404, "NotFound", NOT_FOUND_MESSAGE, {})
        if len(req.body or b"") > MAX_REQUEST_BODY_BYTES:
            # kube-apiserver's request scope reads at most this much of a write's body.
            raise ApiError(
                413,
                "RequestEntityTooLarge",
                f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}",
            )
        h = self.handlers
        custom = self.subresource_handlers.get((rt.group, rt.resource, sub)) if sub else None
        if custom is not None:
            return await custom(self, req, attrs, rt)
        if sub and not rt.has(sub):
            raise ApiError(404, "NotFound", NOT_FOUND_MESSAGE, {})
        if verb not in rt.verbs:
            raise ApiError(
                405, "MethodNotAllowed",
                f'{verb} is not supported on resources of kind "{rt.qualified}"',
                {"group": rt.group, "kind": rt.resource} if rt.group else {"kind": rt.resource},
            )  # fmt: skip
        if verb == "create" and rt.verbs == ("create",):
            return await self._review(rt, req)
        if verb == "get":
            if sub == "scale":
                return h.scales.get_scale(rt, ns, name)
            return await h.reads.get(rt, ns, name, req)
        if verb == "list":
            return await h.reads.list(rt, ns, req)
        if verb == "watch":
            return await h.watches.watch(rt, ns, name, req)
        if verb == "create":
            if name:
                raise errors.method_not_allowed()
            ctx = write_ctx(req, "CreateOptions")
            return await h.creates.create(rt, ns, parse_body(req, rt=rt), ctx)
        if verb == "update":
            ctx = write_ctx(req, "UpdateOptions", sub)
            if sub == "scale":
                return await h.scales.update_scale(rt, ns, name, parse_body(req, rt=rt), ctx)
            return await h.updates.update(rt, ns, name, parse_body(req, rt=rt), ctx)
        if verb == "patch":
            ctx = write_ctx(req, "PatchOptions", sub)
            return await h.patches.patch(rt, ns, name, req, ctx)
        if verb == "delete":
            if sub:
                raise errors.method_not_allowed()
            return await h.deletes.delete(rt, ns, name, delete_options(req), req.user)
        if verb == "deletecollection":
            return await h.deletes.delete_collection(rt, ns, req, delete_options(req))
        raise errors.method_not_allowed()

    async def _review(self, rt: ResourceType, req: ApiRequest) -> ApiResponse:
        fn = self.reviews.get(rt.group_resource)
        if fn is None:
            raise ApiError(404, "NotFound", NOT_FOUND_MESSAGE, {})
        body = parse_body(req, rt=rt)
        if not isinstance(body, dict):
            raise errors.bad_request(f"Object '{rt.kind}' is not a valid object")
        assert req.user is not None
        result = await _maybe_await(fn(body, req.user))
        result.setdefault("kind", rt.kind)
        result.setdefault("apiVersion", rt.api_version)
        ctx = WriteCtx(user=req.user)
        return self.handlers.backend.respond_obj(rt, result, 201, ctx)
