"""Cluster node and resource summaries, computed as upstream's cluster status controller.

Inputs are trimmed Node and Pod dicts from the member's caches. Outputs are the
`nodeSummary`, `resourceSummary` and `allocatableModelings` fields of Cluster.status.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .quantity import Quantity, QuantityError, format_quantity, parse_quantity

Obj = dict[str, Any]

_TERMINAL_PHASES = ("Succeeded", "Failed")
_BINARY_RESOURCES = ("memory", "ephemeral-storage", "storage")
# Resources a resource model may grade nodes by (upstream modeling.ConvertToResourceList).
_MODELED_RESOURCES = ("cpu", "memory", "storage", "ephemeral-storage")


def _quantity(value: Any) -> Quantity | None:
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError, ArithmeticError):
        return None


def node_ready(node: Obj) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def node_summary(nodes: Iterable[Obj]) -> Obj:
    total = ready = 0
    for node in nodes:
        total += 1
        ready += node_ready(node)
    summary: Obj = {}
    # int32 fields with omitempty in the Go type.
    if total:
        summary["totalNum"] = total
    if ready:
        summary["readyNum"] = ready
    return summary


@dataclass
class ResourceTally:
    """Sum of pod requests, kept like upstream's util.Resource (milli-CPU, bytes, counts)."""

    values: dict[str, Decimal] = field(default_factory=dict)
    pods: int = 0

    def add(self, name: str, amount: Decimal) -> None:
        self.values[name] = self.values.get(name, Decimal(0)) + amount

    def add_pod(self, pod: Obj) -> None:
        for name, amount in pod_requests(pod).items():
            self.add(name, amount)
        self.pods += 1

    def resource_list(self) -> dict[str, str] | None:
        out: dict[str, str] = {}
        for name, amount in sorted(self.values.items()):
            if amount <= 0:
                continue
            if name == "cpu":
                out[name] = format_quantity(amount.quantize(Decimal("0.001")), "DecimalSI")
            elif name in _BINARY_RESOURCES or name.startswith("hugepages-"):
                out[name] = format_quantity(amount.to_integral_value(), "BinarySI")
            else:
                out[name] = format_quantity(amount.to_integral_value(), "DecimalSI")
        if self.pods > 0:
            out["pods"] = format_quantity(Decimal(self.pods), "DecimalSI")
        return out or None


def _container_requests(container: Obj) -> dict[str, Decimal]:
    requests = (container.get("resources") or {}).get("requests") or {}
    out: dict[str, Decimal] = {}
    for name, raw in requests.items():
        q = _quantity(raw)
        if q is not None:
            out[name] = q.value
    return out


def pod_requests(pod: Obj) -> dict[str, Decimal]:
    """Effective request: containers summed, element-wise max with each init container,
    plus overhead."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or ():
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for container in spec.get("initContainers") or ():
        for name, amount in _container_requests(container).items():
            if amount > total.get(name, Decimal(0)):
                total[name] = amount
    for name, raw in (spec.get("overhead") or {}).items():
        q = _quantity(raw)
        if q is not None:
            total[name] = total.get(name, Decimal(0)) + q.value
    return total


def _scheduled_and_active(pod: Obj) -> bool:
    return (
        bool((pod.get("spec") or {}).get("nodeName"))
        and (pod.get("status") or {}).get("phase") not in _TERMINAL_PHASES
    )


def cluster_allocatable(nodes: Iterable[Obj]) -> dict[str, str]:
    # Sums keep the format of the first node's quantity, like Go's Quantity.Add.
    sums: dict[str, Quantity] = {}
    for node in nodes:
        for name, raw in ((node.get("status") or {}).get("allocatable") or {}).items():
            q = _quantity(raw)
            if q is None:
                continue
            sums[name] = sums[name] + q if name in sums else q
    return {name: str(q) for name, q in sorted(sums.items())}


def resource_summary(nodes: list[Obj], pods: list[Obj]) -> Obj:
    allocating, allocated = ResourceTally(), ResourceTally()
    for pod in pods:
        if not (pod.get("spec") or {}).get("nodeName"):
            allocating.add_pod(pod)
        elif _scheduled_and_active(pod):
            allocated.add_pod(pod)
    summary: Obj = {}
    allocatable = cluster_allocatable(nodes)
    if allocatable:
        summary["allocatable"] = allocatable
    for key, tally in (("allocating", allocating), ("allocated", allocated)):
        listed = tally.resource_list()
        if listed:
            summary[key] = listed
    return summary


def _model_minimums(resource_models: list[Obj]) -> tuple[list[str], list[dict[str, Decimal]]]:
    names: list[str] = []
    minimums: list[dict[str, Decimal]] = []
    for model in resource_models:
        grade_min: dict[str, Decimal] = {}
        for item in model.get("ranges") or ():
            name = item.get("name")
            q = _quantity(item.get("min", 0))
            if name is None or q is None:
                continue
            grade_min[name] = q.value
            if name not in names:
                names.append(name)
        minimums.append(grade_min)
    return names, minimums


def _grade_of(
    available: dict[str, Decimal], names: list[str], minimums: list[dict[str, Decimal]]
) -> int:
    """The highest grade whose minimum every graded resource reaches; -1 if none."""
    grade = len(minimums) - 1
    for name in names:
        value = available.get(name, Decimal(0))
        best = -1
        for index, grade_min in enumerate(minimums):
            if grade_min.get(name, Decimal(0)) <= value:
                best = index
        grade = min(grade, best)
    return grade


def allocatable_modelings(
    resource_models: list[Obj], nodes: list[Obj], pods: list[Obj]
) -> list[Obj] | None:
    """Count nodes per resource-model grade by what is still free on each node.

    Upstream stops counting at the first node with no pod capacity left (a `break`
    where `continue` was meant), so later nodes are never counted; we skip only
    that node.
    """
    if not resource_models:
        return None
    names, minimums = _model_minimums(resource_models)
    per_node: dict[str, ResourceTally] = {}
    for pod in pods:
        if _scheduled_and_active(pod):
            per_node.setdefault(pod["spec"]["nodeName"], ResourceTally()).add_pod(pod)
    counts = [0] * len(resource_models)
    for node in nodes:
        allocatable: dict[str, Decimal] = {}
        for name, raw in ((node.get("status") or {}).get("allocatable") or {}).items():
            q = _quantity(raw)
            if q is not None:
                allocatable[name] = q.value
        used = per_node.get((node.get("metadata") or {}).get("name", ""), ResourceTally())
        if allocatable.get("pods", Decimal(0)) - used.pods <= 0:
            continue
        available = {
            name: allocatable[name] - used.values.get(name, Decimal(0))
            for name in _MODELED_RESOURCES
            if name in allocatable
        }
        grade = _grade_of(available, names, minimums)
        if grade >= 0:
            counts[grade] += 1
    return [
        {"grade": model.get("grade", index), "count": counts[index]}
        for index, model in enumerate(resource_models)
    ]


def api_enablements(groups: Iterable[tuple[str, Iterable[tuple[str, str]]]]) -> list[Obj]:
    """Upstream's apiEnablements shape from (groupVersion, [(resource, kind)]) discovery data:
    subresources dropped, resources sorted by name, entries sorted by groupVersion."""
    out: list[Obj] = []
    for group_version, resources in groups:
        listed = sorted(
            ({"name": name, "kind": kind} for name, kind in resources if "/" not in name),
            key=lambda r: r["name"],
        )
        entry: Obj = {"groupVersion": group_version}
        if listed:
            entry["resources"] = listed
        out.append(entry)
    out.sort(key=lambda e: e["groupVersion"])
    return out
