"""The status an agent reflects into Work.status.manifestStatuses[].status.

Kinds with a rule expose a chosen subset of their status (field names and
omitempty behaviour as the Go types serialise them); Deployment, DaemonSet and
StatefulSet statuses also carry the member `generation` and the template's
`resourceTemplateGeneration` so the control plane can tell whether the status is
current. Other kinds reflect their whole `.status`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .names import RESOURCE_TEMPLATE_GENERATION_ANNOTATION

Obj = dict[str, Any]

# (field, keep-when-zero): Go serialises fields without `omitempty` even when zero.
_Fields = tuple[tuple[str, bool], ...]

_DEPLOYMENT: _Fields = (
    ("replicas", False),
    ("updatedReplicas", False),
    ("readyReplicas", False),
    ("availableReplicas", False),
    ("unavailableReplicas", False),
)
_DAEMONSET: _Fields = (
    ("currentNumberScheduled", True),
    ("numberMisscheduled", True),
    ("desiredNumberScheduled", True),
    ("numberReady", True),
    ("updatedNumberScheduled", False),
    ("numberAvailable", False),
    ("numberUnavailable", False),
)
_STATEFULSET: _Fields = (
    ("replicas", True),
    ("readyReplicas", False),
    ("currentReplicas", False),
    ("updatedReplicas", False),
    ("availableReplicas", True),
)
_JOB: _Fields = (
    ("conditions", False),
    ("startTime", False),
    ("completionTime", False),
    ("active", False),
    ("succeeded", False),
    ("failed", False),
)
_PDB: _Fields = (
    ("disruptedPods", False),
    ("disruptionsAllowed", True),
    ("currentHealthy", True),
    ("desiredHealthy", True),
    ("expectedPods", True),
)
_HPA: _Fields = (("currentReplicas", False), ("desiredReplicas", True))


def _pick(status: Obj, fields: _Fields) -> Obj:
    out: Obj = {}
    for name, keep_zero in fields:
        value = status.get(name)
        if value in (None, 0, [], {}, ""):
            if keep_zero:
                out[name] = value if value is not None else 0
            continue
        out[name] = value
    return out


def _with_generation(obj: Obj, picked: Obj) -> Obj:
    metadata = obj.get("metadata") or {}
    wrapped: Obj = {}
    generation = metadata.get("generation")
    if generation:
        wrapped["generation"] = generation
    template_generation = (metadata.get("annotations") or {}).get(
        RESOURCE_TEMPLATE_GENERATION_ANNOTATION
    )
    if template_generation:
        try:
            value = int(template_generation)
        except ValueError:
            value = 0
        if value:
            wrapped["resourceTemplateGeneration"] = value
    wrapped.update(picked)
    return wrapped


def _picker(fields: _Fields, *, wrap: bool = False) -> Callable[[Obj, Obj], Obj]:
    def reflect(obj: Obj, status: Obj) -> Obj:
        picked = _pick(status, fields)
        return _with_generation(obj, picked) if wrap else picked

    return reflect


def _service(obj: Obj, status: Obj) -> Obj:
    return {"loadBalancer": status.get("loadBalancer") or {}}


_RULES: dict[tuple[str, str], Callable[[Obj, Obj], Obj]] = {
    ("apps/v1", "Deployment"): _picker(_DEPLOYMENT, wrap=True),
    ("apps/v1", "DaemonSet"): _picker(_DAEMONSET, wrap=True),
    ("apps/v1", "StatefulSet"): _picker(_STATEFULSET, wrap=True),
    ("batch/v1", "Job"): _picker(_JOB),
    ("policy/v1", "PodDisruptionBudget"): _picker(_PDB),
    ("autoscaling/v2", "HorizontalPodAutoscaler"): _picker(_HPA),
    ("v1", "Service"): _service,
}


def reflect_status(obj: Obj) -> Obj | None:
    """The status to report for `obj`, or None when it has none."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return None
    rule = _RULES.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))
    if rule is None:
        return status or None
    return rule(obj, status)
