"""Writing rendered objects to a cluster: kind -> resource, server-side apply, deletion."""

from __future__ import annotations

from typing import Any

from agent.kube.client import GVR, KubeClient
from agent.kube.errors import NotFoundError
from agent.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    POD_DISRUPTION_BUDGETS,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
)

from . import PROGRAM

FIELD_MANAGER = PROGRAM

Obj = dict[str, Any]

# Every kind deploy/ and the control-plane prerequisites contain: (kind, resource, namespaced).
_KINDS: tuple[tuple[str, GVR, bool], ...] = (
    ("Namespace", NAMESPACES, False),
    ("ServiceAccount", SERVICE_ACCOUNTS, True),
    ("Secret", SECRETS, True),
    ("ConfigMap", CONFIGMAPS, True),
    ("ClusterRole", CLUSTER_ROLES, False),
    ("ClusterRoleBinding", CLUSTER_ROLE_BINDINGS, False),
    ("Role", ROLES, True),
    ("RoleBinding", ROLE_BINDINGS, True),
    ("Deployment", DEPLOYMENTS, True),
    ("PodDisruptionBudget", POD_DISRUPTION_BUDGETS, True),
)
_RESOURCES: dict[tuple[str, str], tuple[GVR, bool]] = {
    (gvr.api_version, kind): (gvr, namespaced) for kind, gvr, namespaced in _KINDS
}


def gvr_of(obj: Obj) -> GVR:
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    if key not in _RESOURCES:
        raise ValueError(f"karmada-bootstrap does not know how to write {key[1]} ({key[0]})")
    return _RESOURCES[key][0]


def namespace_of(obj: Obj) -> str | None:
    meta = obj.get("metadata") or {}
    namespaced = _RESOURCES[(str(obj.get("apiVersion")), str(obj.get("kind")))][1]
    return str(meta.get("namespace") or "default") if namespaced else None


def describe(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')}"


def order_for_apply(objects: list[Obj]) -> list[Obj]:
    """Namespaces first (the rest lives in them), then everything else in the given order."""
    return sorted(objects, key=lambda o: 0 if o.get("kind") == "Namespace" else 1)


async def apply(client: KubeClient, obj: Obj, *, dry_run: bool = False) -> Obj:
    """Server-side apply, taking over fields from earlier writers (a re-run converges)."""
    return await client.apply(
        gvr_of(obj),
        obj,
        field_manager=FIELD_MANAGER,
        force=True,
        namespace=namespace_of(obj),
        dry_run=dry_run,
    )


async def exists(client: KubeClient, obj: Obj) -> bool:
    try:
        await client.get(gvr_of(obj), obj["metadata"]["name"], namespace=namespace_of(obj))
    except NotFoundError:
        return False
    return True


async def delete(client: KubeClient, obj: Obj) -> bool:
    """Delete if present; True when something was deleted."""
    try:
        await client.delete(
            gvr_of(obj),
            obj["metadata"]["name"],
            namespace=namespace_of(obj),
            propagation_policy="Background",
        )
    except NotFoundError:
        return False
    return True
