"""The `kube` library scripts load with `local kube = require("kube")`, as upstream offers it:

- `kube.resourceAdd(q1, q2, ...)`: the sum of resource quantities (strings; nil counts as zero),
  as a canonical quantity string;
- `kube.getResourceQuantity(q)`: a quantity (a string; nil is zero) as a number;
- `kube.accuratePodRequirements(podTemplate)`: what one replica of the pod template needs
  (Karmada's ReplicaRequirements: nodeClaim and resourceRequest; nil for neither);
- `kube.getPodDependencies(podTemplate, namespace)`: the ConfigMaps, Secrets, ServiceAccount and
  PersistentVolumeClaims the pod template refers to, as dependency references.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from agent.karmada.quantity import (
    Quantity,
    QuantityError,
    approximate_float64,
    format_quantity,
    int_value,
    milli_value,
    parse_quantity,
)

from .luavm import Helper

Obj = dict[str, Any]


class HelperError(ValueError):
    pass


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _quantity(value: Any, position: int, function: str) -> Quantity | None:
    """A quantity argument: a string, or nil (Go's zero Quantity, which takes no part in a
    sum's format)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise HelperError(
            f"bad argument #{position} to {function} (string expected, got {_lua_type(value)})"
        )
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise HelperError(str(exc)) from None


def _lua_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "table" if isinstance(value, dict | list) else type(value).__name__


def resource_add(*quantities: Any) -> str:
    """The sum as Go's Quantity.String() prints it, in the format Go's Quantity.Add gives it."""
    total = Quantity(Decimal(0), "DecimalSI")
    for position, value in enumerate(quantities, 1):
        quantity = _quantity(value, position, "resourceAdd")
        if quantity is not None:
            total = total + quantity
    return str(total)


def get_resource_quantity(*args: Any) -> float | int:
    """The quantity as a number, approximated as Go's Quantity.AsApproximateFloat64 does;
    negative and infinite values are errors."""
    if len(args) != 1:
        raise HelperError("getResourceQuantity only accepts one argument")
    quantity = _quantity(args[0], 1, "getResourceQuantity")
    number = 0.0 if quantity is None else approximate_float64(quantity)
    if number < 0:
        raise HelperError(f"int approximation unexpectedly returned a negative value: {args[0]}")
    if math.isinf(number):
        raise HelperError(f"int approximation unexpectedly returned an infinite value: {args[0]}")
    # gopher-lua has one number type; an integral value reads as an integer here, so that it
    # prints as upstream's does ("2", not "2.0").
    return int(number) if number.is_integer() and abs(number) < 2**63 else number


_BINARY_RESOURCES = ("memory", "ephemeral-storage")


def _is_scalar(name: str) -> bool:
    """Extended (domain-qualified, outside kubernetes.io), huge page and attachable volume
    resources: the ones counted besides cpu, memory, ephemeral-storage and pods."""
    if name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    return "/" in name and not name.split("/", 1)[0].endswith("kubernetes.io")


def _amounts(resources: Obj) -> dict[str, int]:
    """A resource list as integers: millicores for cpu, rounded up values for the others."""
    out: dict[str, int] = {}
    for name, value in resources.items():
        if name not in ("cpu", "memory", "ephemeral-storage", "pods") and not _is_scalar(name):
            continue
        quantity = parse_quantity(value)
        out[name] = milli_value(quantity) if name == "cpu" else int_value(quantity)
    return out


def _requests(container: Obj) -> dict[str, int]:
    """Its requests, a limit standing in for a request not given (as the API defaults them)."""
    resources = _dict(container.get("resources"))
    merged = {**_dict(resources.get("limits")), **_dict(resources.get("requests"))}
    return _amounts(merged)


def _format(name: str, amount: int) -> str:
    if name == "cpu":
        return format_quantity(Decimal(amount) / 1000, "DecimalSI")
    binary = name in _BINARY_RESOURCES or name.startswith("hugepages-")
    return format_quantity(Decimal(amount), "BinarySI" if binary else "DecimalSI")


def pod_requirements(template: Any) -> Obj | None:
    """Per-replica requirements as Karmada computes them: the containers' requests summed,
    raised to any larger init container request, plus the pod overhead (only what is above
    zero); node selector, tolerations and required node affinity as the node claim. None
    when there is neither."""
    spec = _dict(_dict(template).get("spec"))
    try:
        total: dict[str, int] = {}
        for container in map(_dict, _list(spec.get("containers"))):
            for name, amount in _requests(container).items():
                total[name] = total.get(name, 0) + amount
        for init in map(_dict, _list(spec.get("initContainers"))):
            for name, amount in _requests(init).items():
                total[name] = max(total.get(name, 0), amount)
        for name, amount in _amounts(_dict(spec.get("overhead"))).items():
            total[name] = total.get(name, 0) + amount
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
    if required is not None:
        claim["hardNodeAffinity"] = required
    if claim:
        out["nodeClaim"] = claim
    requests = {n: _format(n, a) for n, a in total.items() if a > 0}
    if requests:
        out["resourceRequest"] = requests
    return out or None


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


def accurate_pod_requirements(*args: Any) -> Obj | None:
    if len(args) != 1:
        raise HelperError("accuratePodRequirements takes exactly one argument")
    return pod_requirements(args[0])


def get_pod_dependencies(*args: Any) -> list[Obj]:
    if len(args) != 2:
        raise HelperError("getPodDependencies takes exactly two arguments")
    return pod_dependencies(args[0], args[1])


HELPERS: dict[str, Helper] = {
    "resourceAdd": resource_add,
    "getResourceQuantity": get_resource_quantity,
    "accuratePodRequirements": accurate_pod_requirements,
    "getPodDependencies": get_pod_dependencies,
}
