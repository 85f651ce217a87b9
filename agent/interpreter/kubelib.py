"""The `kube` library scripts load with `local kube = require("kube")`, as upstream offers it:

- `kube.resourceAdd(q1, q2, ...)`: the sum of resource quantities (strings; nil counts as zero),
  as a canonical quantity string;
- `kube.accuratePodRequirements(podTemplate)`: what one replica of the pod template needs
  (Karmada's ReplicaRequirements: nodeClaim, resourceRequest, namespace, priorityClassName);
- `kube.getPodDependencies(podTemplate, namespace)`: the ConfigMaps, Secrets, ServiceAccount and
  PersistentVolumeClaims the pod template refers to, as dependency references.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from agent.karmada.quantity import Quantity, QuantityError, parse_quantity

from .luavm import Helper

Obj = dict[str, Any]


class HelperError(ValueError):
    pass


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def resource_add(*quantities: Any) -> str:
    total: Quantity | None = None
    for value in quantities:
        if value is None:
            continue
        if not isinstance(value, str):
            raise HelperError(f"a quantity must be a string, got {value!r}")
        try:
            quantity = parse_quantity(value)
        except QuantityError as exc:
            raise HelperError(str(exc)) from None
        # The sum keeps the format of its first operand, as Go's Quantity.Add does from zero.
        total = quantity if total is None else total + quantity
    return "0" if total is None else str(total)


def _sum(lists: list[Obj]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for resources in lists:
        for name, value in resources.items():
            quantity = parse_quantity(value)
            out[name] = out[name] + quantity if name in out else quantity
    return out


def _requests(container: Obj) -> Obj:
    return _dict(_dict(container.get("resources")).get("requests"))


def pod_requirements(template: Any) -> Obj:
    """Per-replica requirements: the containers' requests summed, raised to any larger init
    container request, plus the pod overhead; node selector, tolerations and required node
    affinity as the node claim."""
    spec = _dict(_dict(template).get("spec"))
    try:
        total = _sum([_requests(_dict(c)) for c in _list(spec.get("containers"))])
        for init in _list(spec.get("initContainers")):
            for name, quantity in _sum([_requests(_dict(init))]).items():
                if name not in total or quantity.value > total[name].value:
                    total[name] = quantity
        for name, quantity in _sum([_dict(spec.get("overhead"))]).items():
            total[name] = total[name] + quantity if name in total else quantity
    except QuantityError as exc:
        raise HelperError(str(exc)) from None
    out: Obj = {}
    claim: Obj = {}
    if spec.get("nodeSelector"):
        claim["nodeSelector"] = spec["nodeSelector"]
    if spec.get("tolerations"):
        claim["tolerations"] = spec["tolerations"]
    affinity = _dict(_dict(spec.get("affinity")).get("nodeAffinity"))
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        claim["hardNodeAffinity"] = required
    if claim:
        out["nodeClaim"] = claim
    requests = {n: str(q) for n, q in total.items() if q.value != Decimal(0)}
    if requests:
        out["resourceRequest"] = requests
    namespace = _dict(_dict(template).get("metadata")).get("namespace")
    if namespace:
        out["namespace"] = namespace
    if spec.get("priorityClassName"):
        out["priorityClassName"] = spec["priorityClassName"]
    return out


def _volume_refs(spec: Obj) -> tuple[list[str], list[str], list[str]]:
    config_maps: list[str] = []
    secrets: list[str] = []
    claims: list[str] = []
    for volume in map(_dict, _list(spec.get("volumes"))):
        config_maps.append(_dict(volume.get("configMap")).get("name") or "")
        secrets.append(_dict(volume.get("secret")).get("secretName") or "")
        claims.append(_dict(volume.get("persistentVolumeClaim")).get("claimName") or "")
        for source in map(_dict, _list(_dict(volume.get("projected")).get("sources"))):
            config_maps.append(_dict(source.get("configMap")).get("name") or "")
            secrets.append(_dict(source.get("secret")).get("name") or "")
    return config_maps, secrets, claims


def _env_refs(spec: Obj) -> tuple[list[str], list[str]]:
    config_maps: list[str] = []
    secrets: list[str] = []
    containers = _list(spec.get("containers")) + _list(spec.get("initContainers"))
    for container in map(_dict, containers):
        for env in map(_dict, _list(container.get("env"))):
            source = _dict(env.get("valueFrom"))
            config_maps.append(_dict(source.get("configMapKeyRef")).get("name") or "")
            secrets.append(_dict(source.get("secretKeyRef")).get("name") or "")
        for env_from in map(_dict, _list(container.get("envFrom"))):
            config_maps.append(_dict(env_from.get("configMapRef")).get("name") or "")
            secrets.append(_dict(env_from.get("secretRef")).get("name") or "")
    return config_maps, secrets


def _unique(names: list[str]) -> list[str]:
    return sorted({n for n in names if n})


def pod_dependencies(template: Any, namespace: Any = None) -> list[Obj]:
    if namespace is not None and not isinstance(namespace, str | int | float):
        raise HelperError(f"namespace must be a string, got {namespace!r}")
    ns = "default" if namespace is None else str(namespace)
    spec = _dict(_dict(template).get("spec"))
    volume_maps, volume_secrets, claims = _volume_refs(spec)
    env_maps, env_secrets = _env_refs(spec)
    pull_secrets = [str(_dict(s).get("name") or "") for s in _list(spec.get("imagePullSecrets"))]
    account = spec.get("serviceAccountName") or ""
    refs: list[tuple[str, list[str]]] = [
        ("ConfigMap", _unique(volume_maps + env_maps)),
        ("Secret", _unique(volume_secrets + env_secrets + pull_secrets)),
        ("ServiceAccount", [] if account in ("", "default") else [str(account)]),
        ("PersistentVolumeClaim", _unique(claims)),
    ]
    return [
        {"apiVersion": "v1", "kind": kind, "namespace": ns, "name": name}
        for kind, names in refs
        for name in names
    ]


def accurate_pod_requirements(*args: Any) -> Obj:
    if len(args) != 1:
        raise HelperError("accuratePodRequirements takes exactly one argument")
    return pod_requirements(args[0])


def get_pod_dependencies(*args: Any) -> list[Obj]:
    if len(args) != 2:
        raise HelperError("getPodDependencies takes exactly two arguments")
    return pod_dependencies(args[0], args[1])


HELPERS: dict[str, Helper] = {
    "resourceAdd": resource_add,
    "accuratePodRequirements": accurate_pod_requirements,
    "getPodDependencies": get_pod_dependencies,
}
