"""Health of a member object, by the rules of Karmada's default resource interpreter.

Kinds without a rule are Healthy (as upstream); an object whose status cannot be
read is Unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .names import HEALTHY, UNHEALTHY, UNKNOWN

Obj = dict[str, Any]


class _MalformedError(Exception):
    pass


def _int(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise _MalformedError(f"expected an integer, got {value!r}")
    return value


def _map(obj: Obj, key: str) -> Obj:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _MalformedError(f"{key} is not an object")
    return value


def _generation_observed(obj: Obj, status: Obj) -> bool:
    generation = _int(_map(obj, "metadata").get("generation"))
    return _int(status.get("observedGeneration")) == generation


def _deployment(obj: Obj) -> bool:
    spec, status = _map(obj, "spec"), _map(obj, "status")
    if not _generation_observed(obj, status):
        return False
    updated = _int(status.get("updatedReplicas"))
    if spec.get("replicas") is not None and updated < _int(spec["replicas"]):
        return False
    return _int(status.get("availableReplicas")) >= updated


def _statefulset(obj: Obj) -> bool:
    spec, status = _map(obj, "spec"), _map(obj, "status")
    if not _generation_observed(obj, status):
        return False
    updated = _int(status.get("updatedReplicas"))
    available = _int(status.get("availableReplicas"))
    if spec.get("replicas") is not None:
        replicas = _int(spec["replicas"])
        want_updated = replicas
        rolling = _map(_map(spec, "updateStrategy"), "rollingUpdate")
        if rolling.get("partition") is not None:
            want_updated -= _int(rolling["partition"])
        if updated < want_updated or available < replicas:
            return False
    return available >= updated


def _replicaset(obj: Obj) -> bool:
    spec, status = _map(obj, "spec"), _map(obj, "status")
    if not _generation_observed(obj, status):
        return False
    return spec.get("replicas") is None or _int(status.get("availableReplicas")) >= _int(
        spec["replicas"]
    )


def _daemonset(obj: Obj) -> bool:
    status = _map(obj, "status")
    if not _generation_observed(obj, status):
        return False
    updated = _int(status.get("updatedNumberScheduled"))
    if updated < _int(status.get("desiredNumberScheduled")):
        return False
    return _int(status.get("numberAvailable")) >= updated


def _has_load_balancer_address(status: Obj) -> bool:
    ingress = _map(status, "loadBalancer").get("ingress") or []
    if not isinstance(ingress, list):
        raise _MalformedError("status.loadBalancer.ingress is not a list")
    return any(isinstance(i, dict) and (i.get("hostname") or i.get("ip")) for i in ingress)


def _service(obj: Obj) -> bool:
    if _map(obj, "spec").get("type") != "LoadBalancer":
        return True
    return _has_load_balancer_address(_map(obj, "status"))


def _ingress(obj: Obj) -> bool:
    return _has_load_balancer_address(_map(obj, "status"))


def _pvc(obj: Obj) -> bool:
    return bool(_map(obj, "status").get("phase") == "Bound")


def _pod(obj: Obj) -> bool:
    status = _map(obj, "status")
    phase = status.get("phase")
    if phase == "Succeeded":
        return True
    if phase != "Running":
        return False
    conditions = status.get("conditions") or []
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def _pdb(obj: Obj) -> bool:
    status = _map(obj, "status")
    return _int(status.get("currentHealthy")) >= _int(status.get("desiredHealthy"))


_RULES: dict[tuple[str, str], Callable[[Obj], bool]] = {
    ("apps/v1", "Deployment"): _deployment,
    ("apps/v1", "StatefulSet"): _statefulset,
    ("apps/v1", "ReplicaSet"): _replicaset,
    ("apps/v1", "DaemonSet"): _daemonset,
    ("v1", "Service"): _service,
    ("networking.k8s.io/v1", "Ingress"): _ingress,
    ("v1", "PersistentVolumeClaim"): _pvc,
    ("v1", "Pod"): _pod,
    ("policy/v1", "PodDisruptionBudget"): _pdb,
}


def has_health_rule(api_version: str, kind: str) -> bool:
    return (api_version, kind) in _RULES


def interpret_health(obj: Obj) -> str:
    rule = _RULES.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))
    if rule is None:
        return HEALTHY
    try:
        return HEALTHY if rule(obj) else UNHEALTHY
    except _MalformedError:
        return UNKNOWN
