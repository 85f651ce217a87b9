"""The APIServices kube-apiserver registers for its own group versions (its autoregister and
CRD-registration controllers).

Every built-in group version the server serves gets a local APIService (no `spec.service`) with
kube's priorities, labelled `kube-aggregator.kubernetes.io/automanaged: onstart` (made at start,
then left alone); every group
version of a CustomResourceDefinition gets one with 1000/100, labelled `...automanaged: true`,
kept while the CRD serves it and deleted when it no longer does. An APIService of the same name
that does not carry the label is the user's, and left alone (that is how an aggregated API server
takes a group version over). Group versions the emulator serves in an aggregated API server's
stead (Karmada's cluster.karmada.io) are not registered: kube-apiserver has no APIService for
them until one is created.
"""

from __future__ import annotations

from emulator.controllers import ControllerContext, run_all, tolerate
from emulator.controllers.subscription import Subscription
from emulator.controllers.workqueue import WorkQueue

from ..registry import JSON, Registry
from . import apiservice
from .layer import GR, Aggregator

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")


def desired(registry: Registry) -> dict[str, JSON]:
    """The local APIServices the registry's group versions call for, by name."""
    out: dict[str, JSON] = {}
    for group in registry.groups():
        for version in registry.versions(group):
            types = registry.resources(group, version)
            from_crd = any(rt.crd_name for rt in types)
            if not from_crd and (group, version) not in apiservice.BUILTIN_PRIORITIES:
                continue
            group_priority, version_priority = apiservice.priorities(group, version)
            name = apiservice.name_of(group, version)
            out[name] = {
                "apiVersion": f"{apiservice.GROUP}/{apiservice.VERSION}",
                "kind": apiservice.KIND,
                "metadata": {
                    "name": name,
                    "labels": {AUTOMANAGED: "true" if from_crd else "onstart"},
                },
                "spec": {
                    "group": group,
                    "version": version,
                    "groupPriorityMinimum": group_priority,
                    "versionPriority": version_priority,
                },
            }
    return out


async def sync(
    ctx: ControllerContext, aggregator: Aggregator, started: set[str] | None = None
) -> None:
    """Create, correct and delete the automanaged APIServices. `started`: the onstart ones
    already made, which are not made again."""
    wanted = desired(aggregator.registry)
    current = {obj["metadata"]["name"]: obj for obj in aggregator.apiservices()}
    for name, obj in wanted.items():
        onstart = obj["metadata"]["labels"][AUTOMANAGED] == "onstart"
        if onstart and started is not None and name in started:
            continue
        await _ensure(ctx, obj, current.get(name))
        if onstart and started is not None:
            started.add(name)
    for name, existing in current.items():
        if name in wanted:
            continue
        if (existing["metadata"].get("labels") or {}).get(AUTOMANAGED) == "true":
            await tolerate(ctx.api.delete(f"{apiservice.PATH}/{name}"), 404)


async def _ensure(ctx: ControllerContext, obj: JSON, existing: JSON | None) -> None:
    name = obj["metadata"]["name"]
    if existing is None:
        await tolerate(ctx.api.create(apiservice.PATH, obj), 409)
    elif AUTOMANAGED not in (existing["metadata"].get("labels") or {}):
        return  # the user's
    elif existing.get("spec") != obj["spec"]:
        updated = {**existing, "spec": obj["spec"]}
        await tolerate(ctx.api.update(f"{apiservice.PATH}/{name}", updated), 404, 409)


async def run(ctx: ControllerContext, *, aggregator: Aggregator) -> None:
    started: set[str] = set()
    queue = WorkQueue(
        lambda _key: sync(ctx, aggregator, started), retry_delay=ctx.knobs.retry_delay
    )
    crds = Subscription(ctx.storage, CRDS)
    apiservices = Subscription(ctx.storage, GR)
    crds.add_handler(lambda _type, _obj: queue.add("sync"))
    apiservices.add_handler(lambda _type, _obj: queue.add("sync"))
    queue.add("sync")
    await run_all(crds.run(), apiservices.run(), queue.run())
