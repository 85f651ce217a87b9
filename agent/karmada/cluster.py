"""Small facts about Karmada's Cluster object shared by several controllers."""

from __future__ import annotations

from typing import Any

from .conditions import Condition, new_condition
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


# Ours: whether the agent's clock agrees with the API servers' (from the Date of their answers).
CONDITION_CLOCK_SYNCHRONIZED = "ClockSynchronized"
REASON_CLOCK_SYNCHRONIZED = "ClockSynchronized"
REASON_CLOCK_SKEWED = "ClockSkewed"
EVENT_CLOCK_SKEWED = "ClockSkewed"
# Below this the skew matters to nothing Karmada does.
CLOCK_SKEW_TOLERANCE = 5.0


def _off_by(skew: float, server: str) -> str:
    seconds = abs(round(skew))
    return f"{seconds}s {'ahead of' if skew > 0 else 'behind'} {server}"


def clock_condition(skews: dict[str, float], tolerance: float = CLOCK_SKEW_TOLERANCE) -> Condition:
    """ClockSynchronized from how far the agent's clock is ahead of each API server's (seconds,
    negative: behind), keyed by how the message names the server."""
    off = {server: skew for server, skew in skews.items() if abs(skew) > tolerance}
    if not off:
        return new_condition(
            CONDITION_CLOCK_SYNCHRONIZED,
            "True",
            REASON_CLOCK_SYNCHRONIZED,
            f"the agent's clock is within {tolerance:.0f}s of {' and '.join(skews)}",
        )
    described = " and ".join(_off_by(skew, server) for server, skew in off.items())
    return new_condition(
        CONDITION_CLOCK_SYNCHRONIZED,
        "False",
        REASON_CLOCK_SKEWED,
        f"the agent's clock is {described} (more than {tolerance:.0f}s off). The heartbeat and "
        f"outage checks use the control plane's time, but certificates and tokens may look not "
        f"yet valid or expire early, and timestamps the agent writes are off: set the node's "
        f"clock right (NTP)",
    )
