"""Small facts about Karmada's Cluster object shared by several controllers."""

from __future__ import annotations

from typing import Any

from .names import CLUSTER_API_VERSION


def cluster_owner_reference(cluster: dict[str, Any], *, controller: bool = False) -> dict[str, Any]:
    """An ownerReference to `cluster`: plain for the heartbeat Lease, a controller reference
    (blocking the owner's deletion) for the reported credential Secrets, as upstream."""
    meta = cluster.get("metadata") or {}
    reference: dict[str, Any] = {
        "apiVersion": CLUSTER_API_VERSION,
        "kind": "Cluster",
        "name": meta.get("name"),
        "uid": meta.get("uid"),
    }
    if controller:
        reference["controller"] = True
        reference["blockOwnerDeletion"] = True
    return reference
