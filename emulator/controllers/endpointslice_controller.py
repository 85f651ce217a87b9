"""Stands in for kube-controller-manager's EndpointSlice controller on a member cluster.

For every Service with a selector it keeps EndpointSlices listing the Pods the selector
matches (those with an IP, not terminating), as the real controller writes them: labels
`kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by:
endpointslice-controller.k8s.io` (plus the Service's own labels), the Service as controlling
owner, at most `max_endpoints_per_slice` endpoints per slice (kube's default is 100), names
generated from the Service's name, and one empty placeholder slice when nothing matches.
Deleting the Service removes its slices through the garbage collector (owner references).
Selector-less Services are left alone: their slices belong to whoever manages them.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable

from emulator.controllers import ControllerContext, run_all, tolerate
from emulator.controllers.subscription import Subscription, object_key, split_key
from emulator.controllers.workqueue import WorkQueue
from emulator.loopback import JSON

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"
MAX_ENDPOINTS_PER_SLICE = 100
# Labels of the Service that the real controller does not copy onto its slices.
_RESERVED_LABELS = (SERVICE_NAME_LABEL, MANAGED_BY_LABEL, "service.kubernetes.io/headless")


async def run(ctx: ControllerContext) -> None:
    services = Subscription(ctx.storage, ("", "services"))
    pods = Subscription(ctx.storage, ("", "pods"))
    slices = Subscription(
        ctx.storage,
        ("discovery.k8s.io", "endpointslices"),
        where=lambda s: (
            (s["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == CONTROLLER_NAME
        ),
    )
    queue = WorkQueue(_reconciler(ctx, services, pods, slices), retry_delay=ctx.knobs.retry_delay)

    def service_event(_event_type: str, obj: JSON) -> None:
        queue.add(object_key(obj))

    def pod_event(_event_type: str, obj: JSON) -> None:
        for service in services.items(obj["metadata"].get("namespace", "")):
            queue.add(object_key(service))

    def slice_event(_event_type: str, obj: JSON) -> None:
        # Someone else edited or deleted one of our slices: put it back as it should be.
        service = (obj["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        if service:
            queue.add(f"{obj['metadata'].get('namespace', '')}/{service}")

    services.add_handler(service_event)
    pods.add_handler(pod_event)
    slices.add_handler(slice_event)
    await run_all(services.run(), pods.run(), slices.run(), queue.run())


def _reconciler(
    ctx: ControllerContext, services: Subscription, pods: Subscription, slices: Subscription
) -> Callable[[str], Awaitable[None]]:
    async def reconcile(key: str) -> None:
        service = services.get(key)
        if service is None or service["metadata"].get("deletionTimestamp"):
            return
        selector = (service.get("spec") or {}).get("selector")
        if not selector:
            return
        namespace, name = split_key(key)
        selected = [pod for pod in pods.items(namespace) if _selects(selector, pod)]
        endpoints = [ep for ep in (_endpoint(pod) for pod in selected) if ep is not None]
        ports = _ports(service, selected) if endpoints else []
        chunks = [
            endpoints[i : i + MAX_ENDPOINTS_PER_SLICE]
            for i in range(0, len(endpoints), MAX_ENDPOINTS_PER_SLICE)
        ] or [[]]
        existing = [
            s
            for s in slices.items(namespace)
            if (s["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == name
        ]
        path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
        for index, chunk in enumerate(chunks):
            desired = _slice(service, chunk, ports)
            if index < len(existing):
                current = existing[index]
                if _same(current, desired):
                    continue
                updated = copy.deepcopy(current)
                updated["metadata"]["labels"] = desired["metadata"]["labels"]
                updated["metadata"]["ownerReferences"] = desired["metadata"]["ownerReferences"]
                for field in ("addressType", "endpoints", "ports"):
                    updated[field] = desired[field]
                await tolerate(
                    ctx.api.update(f"{path}/{current['metadata']['name']}", updated), 404
                )
            else:
                await ctx.api.create(path, desired)
        for surplus in existing[len(chunks) :]:
            await tolerate(ctx.api.delete(f"{path}/{surplus['metadata']['name']}"), 404)

    return reconcile


def _selects(selector: dict[str, str], pod: JSON) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _endpoint(pod: JSON) -> JSON | None:
    status = pod.get("status") or {}
    ip = status.get("podIP")
    if not ip or pod["metadata"].get("deletionTimestamp"):
        return None
    if status.get("phase") in ("Succeeded", "Failed"):
        return None
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    endpoint: JSON = {
        "addresses": [ip],
        "conditions": {"ready": ready, "serving": ready, "terminating": False},
        "targetRef": {
            "kind": "Pod",
            "namespace": pod["metadata"].get("namespace", ""),
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"].get("uid", ""),
        },
    }
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        endpoint["nodeName"] = node
    return endpoint


def _ports(service: JSON, pods: list[JSON]) -> list[JSON]:
    """Service ports resolved to the Pods' target ports (a named targetPort is looked up in the
    first selected Pod's containers, as the controller does per Pod)."""
    ports: list[JSON] = []
    for port in (service.get("spec") or {}).get("ports") or []:
        target = port.get("targetPort", port.get("port"))
        if isinstance(target, str):
            target = _named_port(pods, target)
            if target is None:
                continue
        entry: JSON = {"name": port.get("name", ""), "port": int(target)}
        entry["protocol"] = port.get("protocol", "TCP")
        if port.get("appProtocol"):
            entry["appProtocol"] = port["appProtocol"]
        ports.append(entry)
    return ports


def _named_port(pods: list[JSON], name: str) -> int | None:
    for pod in pods:
        for container in (pod.get("spec") or {}).get("containers") or []:
            for port in container.get("ports") or []:
                if port.get("name") == name and port.get("containerPort"):
                    return int(port["containerPort"])
    return None


def _slice(service: JSON, endpoints: list[JSON], ports: list[JSON]) -> JSON:
    meta = service["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in _RESERVED_LABELS}
    labels[SERVICE_NAME_LABEL] = meta["name"]
    labels[MANAGED_BY_LABEL] = CONTROLLER_NAME
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "generateName": f"{meta['name']}-",
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    }


def _same(current: JSON, desired: JSON) -> bool:
    meta = current["metadata"]
    return bool(
        (meta.get("labels") or {}) == desired["metadata"]["labels"]
        and (meta.get("ownerReferences") or []) == desired["metadata"]["ownerReferences"]
        and (current.get("endpoints") or []) == desired["endpoints"]
        and (current.get("ports") or []) == desired["ports"]
    )
