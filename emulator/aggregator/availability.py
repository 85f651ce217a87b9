"""The Available condition of every APIService, kept as kube-aggregator's availability
controllers keep it.

A local APIService is always available (reason Local). A remote one is checked: its Service must
exist (ServiceNotFound), a ClusterIP Service must list the port (ServicePortError) and have
endpoints, which here means an address in the emulator's ServiceNetwork (EndpointsNotFound; an
ExternalName Service is dialled by its external name); then the backend must answer
`GET /apis/<group>/<version>` with a 2xx within five seconds, asked over TLS without verifying
the server (kube's check does not), with the front-proxy certificate, as system:kube-aggregator
in system:masters (FailedDiscoveryCheck, with Go's words for what went wrong; Passed when all
is well). The condition's lastTransitionTime moves only when its status does.

A check runs when the APIService or its Service changes, when the Service's address is mapped,
and every `knobs.apiservice_resync` seconds (kube: 30); after a check passes, the backend's
discovery document is fetched again for aggregated discovery.
"""

from __future__ import annotations

import asyncio
import copy

from emulator.controllers import ControllerContext, run_all, tolerate
from emulator.controllers.subscription import Subscription
from emulator.controllers.workqueue import WorkQueue
from emulator.timefmt import rfc3339

from ..registry import JSON
from ..requestheader import proxy_headers
from . import apiservice
from .documents import AGGREGATOR
from .layer import GR, Aggregator
from .proxy import Backend, UnreachableError

CHECK_TIMEOUT = 5.0
LOCAL = ("True", "Local", "Local APIServices are always available")
SERVICES = ("", "services")


def _discovery_path(obj: JSON) -> str:
    group, version = apiservice.group_version(obj)
    if obj["metadata"]["name"] == f"{version}.":
        return f"/api/{version}"
    return f"/apis/{group}/{version}"


async def check(aggregator: Aggregator, ctx: ControllerContext, obj: JSON) -> tuple[str, str, str]:
    """(status, reason, message) of the Available condition `obj` deserves now."""
    backend = Backend.of(obj)
    if backend is None:
        return LOCAL
    where = f"service/{backend.service} in {_go_quote(backend.namespace)}"
    service = ctx.storage.get(SERVICES, backend.namespace, backend.service)
    if service is None:
        return "False", "ServiceNotFound", f"{where} is not present"
    spec = service.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    mapped = aggregator.proxy.services.address(backend.namespace, backend.service)
    if kind == "ClusterIP":
        ports = [p.get("port") for p in spec.get("ports") or []]
        if backend.port not in ports:
            return "False", "ServicePortError", f"{where} is not listening on port {backend.port}"
        if mapped is None:
            message = (
                f"cannot find endpointslices for service/{backend.service} in "
                f"{_go_quote(backend.namespace)}"
            )
            return "False", "EndpointsNotFound", message
    host, port = mapped or (str(spec.get("externalName") or backend.server_name), backend.port)
    shown = f"[{host}]" if ":" in host else host
    url = f"https://{shown}:{port}{_discovery_path(obj)}"
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            response = await aggregator.proxy.send(
                backend, "GET", _discovery_path(obj), proxy_headers(AGGREGATOR), verify=False
            )
            await response.aclose()
    except TimeoutError:
        detail = f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
        return "False", "FailedDiscoveryCheck", f"failing or missing response from {url}: {detail}"
    except UnreachableError as exc:
        message = f'failing or missing response from {url}: Get "{url}": {exc}'
        return "False", "FailedDiscoveryCheck", message
    if not 200 <= response.status_code < 300:
        message = f"bad status from {url}: {response.status_code}"
        return "False", "FailedDiscoveryCheck", message
    return "True", "Passed", "all checks passed"


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def with_condition(obj: JSON, status: str, reason: str, message: str, now: str) -> JSON:
    """`obj` with its Available condition set (kube's SetAPIServiceCondition)."""
    updated = copy.deepcopy(obj)
    conditions: list[JSON] = updated.setdefault("status", {}).setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == apiservice.AVAILABLE:
            if cond.get("status") != status:
                cond["status"] = status
                cond["lastTransitionTime"] = now
            cond["reason"] = reason
            cond["message"] = message
            return updated
    conditions.append(
        {
            "type": apiservice.AVAILABLE,
            "status": status,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }
    )
    return updated


async def sync(ctx: ControllerContext, aggregator: Aggregator, name: str) -> None:
    obj = ctx.storage.get(GR, "", name)
    if obj is None:
        return
    status, reason, message = await check(aggregator, ctx, obj)
    current = ctx.storage.get(GR, "", name)
    if current is None or current["metadata"].get("uid") != obj["metadata"].get("uid"):
        return
    updated = with_condition(current, status, reason, message, rfc3339(ctx.clock()))
    if updated.get("status") != current.get("status"):
        await tolerate(ctx.api.update(f"{apiservice.PATH}/{name}/status", updated), 404, 409)
    backend = Backend.of(current)
    if backend is None:
        return
    group_version = apiservice.group_version(current)
    if status == "True":
        await aggregator.documents.refresh(backend, group_version)
    else:
        aggregator.documents.mark_stale(backend)


async def run(ctx: ControllerContext, *, aggregator: Aggregator) -> None:
    queue = WorkQueue(lambda name: sync(ctx, aggregator, name), retry_delay=ctx.knobs.retry_delay)
    apiservices = Subscription(ctx.storage, GR)
    services = Subscription(ctx.storage, SERVICES)

    def remote_of(namespace: str, name: str) -> list[str]:
        return [
            obj["metadata"]["name"]
            for obj in aggregator.apiservices()
            if (b := Backend.of(obj)) is not None and (b.namespace, b.service) == (namespace, name)
        ]

    def on_service(_type: str, obj: JSON) -> None:
        meta = obj["metadata"]
        for name in remote_of(meta.get("namespace", ""), meta["name"]):
            queue.add(name)

    def on_mapped(key: str) -> None:
        namespace, _, name = key.partition("/")
        for apiservice_name in remote_of(namespace, name):
            queue.add(apiservice_name)

    apiservices.add_handler(lambda _type, obj: queue.add(obj["metadata"]["name"]))
    services.add_handler(on_service)
    aggregator.proxy.services.listeners.append(on_mapped)

    async def resync() -> None:
        while True:
            await asyncio.sleep(ctx.knobs.apiservice_resync)
            for obj in aggregator.apiservices():
                if Backend.of(obj) is not None:
                    queue.add(obj["metadata"]["name"])

    try:
        await run_all(apiservices.run(), services.run(), queue.run(), resync())
    finally:
        aggregator.proxy.services.listeners.remove(on_mapped)
