"""meta.k8s.io/v1 Table output, as kube-apiserver renders for `kubectl get`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .timefmt import parse_time

if TYPE_CHECKING:
    from .registry import ResourceType

JSON = dict[str, Any]

_NAME_COL = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace. Is required when creating resources, "
    "although some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    "priority": 0,
}
_AGE_DESC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created."
)


def epoch_of(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return parse_time(value).timestamp()
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kube's duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = (s % 3600) // 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(obj: JSON, now: float) -> str:
    created = epoch_of((obj.get("metadata") or {}).get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration(now - created)


def _col(name: str, type_: str = "string", priority: int = 0, desc: str = "") -> JSON:
    return {"name": name, "type": type_, "format": "", "description": desc, "priority": priority}


_AGE = _col("Age", desc=_AGE_DESC)


def _g(obj: Any, *keys: Any, default: Any = None) -> Any:
    for k in keys:
        if isinstance(obj, dict):
            obj = obj.get(k)
        elif isinstance(obj, list) and isinstance(k, int) and -len(obj) <= k < len(obj):
            obj = obj[k]
        else:
            return default
    return default if obj is None else obj


def _containers(obj: JSON) -> tuple[str, str]:
    cs = _g(obj, "spec", "template", "spec", "containers", default=[])
    return ",".join(c.get("name", "") for c in cs), ",".join(c.get("image", "") for c in cs)


def _selector(obj: JSON) -> str:
    from .selectors import label_selector_string

    return label_selector_string(_g(obj, "spec", "selector")) or "<none>"


def _pod_cells(obj: JSON, now: float) -> list[Any]:
    statuses = _g(obj, "status", "containerStatuses", default=[])
    total = len(_g(obj, "spec", "containers", default=[]))
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    reason = _g(obj, "status", "reason") or _g(obj, "status", "phase", default="Unknown")
    if _g(obj, "metadata", "deletionTimestamp"):
        reason = "Terminating"
    return [
        obj["metadata"]["name"], f"{ready}/{total}", reason, restarts, age(obj, now),
        _g(obj, "status", "podIP", default="<none>"), _g(obj, "spec", "nodeName", default="<none>"),
        _g(obj, "status", "nominatedNodeName", default="<none>"), "<none>",
    ]  # fmt: skip


def _deploy_cells(obj: JSON, now: float) -> list[Any]:
    names, images = _containers(obj)
    st = obj.get("status") or {}
    return [
        obj["metadata"]["name"],
        f"{st.get('readyReplicas', 0)}/{_g(obj, 'spec', 'replicas', default=1)}",
        st.get("updatedReplicas", 0), st.get("availableReplicas", 0), age(obj, now),
        names, images, _selector(obj),
    ]  # fmt: skip


def _sts_cells(obj: JSON, now: float) -> list[Any]:
    names, images = _containers(obj)
    st = obj.get("status") or {}
    ready = f"{st.get('readyReplicas', 0)}/{_g(obj, 'spec', 'replicas', default=1)}"
    return [obj["metadata"]["name"], ready, age(obj, now), names, images]


def _rs_cells(obj: JSON, now: float) -> list[Any]:
    names, images = _containers(obj)
    st = obj.get("status") or {}
    return [
        obj["metadata"]["name"], _g(obj, "spec", "replicas", default=1), st.get("replicas", 0),
        st.get("readyReplicas", 0), age(obj, now), names, images, _selector(obj),
    ]  # fmt: skip


def _ds_cells(obj: JSON, now: float) -> list[Any]:
    names, images = _containers(obj)
    st = obj.get("status") or {}
    node_sel = _g(obj, "spec", "template", "spec", "nodeSelector", default={})
    return [
        obj["metadata"]["name"], st.get("desiredNumberScheduled", 0),
        st.get("currentNumberScheduled", 0), st.get("numberReady", 0),
        st.get("updatedNumberScheduled", 0), st.get("numberAvailable", 0),
        ",".join(f"{k}={v}" for k, v in sorted(node_sel.items())) or "<none>", age(obj, now),
        names, images, _selector(obj),
    ]  # fmt: skip


def _job_cells(obj: JSON, now: float) -> list[Any]:
    names, images = _containers(obj)
    st = obj.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    status = (
        "Complete" if conds.get("Complete") == "True"
        else "Failed" if conds.get("Failed") == "True"
        else "Running"
    )  # fmt: skip
    completions = _g(obj, "spec", "completions", default=1)
    start = epoch_of(st.get("startTime"))
    end = epoch_of(st.get("completionTime")) or now
    duration = human_duration(end - start) if start is not None else ""
    return [
        obj["metadata"]["name"], status, f"{st.get('succeeded', 0)}/{completions}", duration,
        age(obj, now), names, images, _selector(obj),
    ]  # fmt: skip


def _ns_cells(obj: JSON, now: float) -> list[Any]:
    return [obj["metadata"]["name"], _g(obj, "status", "phase", default=""), age(obj, now)]


def _cm_cells(obj: JSON, now: float) -> list[Any]:
    n = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [obj["metadata"]["name"], n, age(obj, now)]


def _secret_cells(obj: JSON, now: float) -> list[Any]:
    n = len(obj.get("data") or {}) + len(obj.get("stringData") or {})
    return [obj["metadata"]["name"], obj.get("type", "Opaque"), n, age(obj, now)]


def _svc_cells(obj: JSON, now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    ports = ",".join(
        f"{p.get('port')}/{p.get('protocol', 'TCP')}"
        if not p.get("nodePort")
        else f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or []
    )
    ingress = _g(obj, "status", "loadBalancer", "ingress", default=[])
    external = ",".join(i.get("ip") or i.get("hostname", "") for i in ingress)
    if not external:
        external = "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    return [
        obj["metadata"]["name"], spec.get("type", "ClusterIP"), spec.get("clusterIP", "<none>"),
        external, ports or "<none>", age(obj, now), selector or "<none>",
    ]  # fmt: skip


def _node_cells(obj: JSON, now: float) -> list[Any]:
    conds = {c.get("type"): c.get("status") for c in _g(obj, "status", "conditions", default=[])}
    status = "Ready" if conds.get("Ready") == "True" else "NotReady"
    if conds.get("Ready") is None:
        status = "Unknown"
    if _g(obj, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    labels = _g(obj, "metadata", "labels", default={})
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    addresses = {
        a.get("type"): a.get("address") for a in _g(obj, "status", "addresses", default=[])
    }
    info = _g(obj, "status", "nodeInfo", default={})
    return [
        obj["metadata"]["name"], status, ",".join(roles) or "<none>", age(obj, now),
        info.get("kubeletVersion", ""), addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"), info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"), info.get("containerRuntimeVersion", "<unknown>"),
    ]  # fmt: skip


def _csr_cells(obj: JSON, now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    conds = [c.get("type") for c in _g(obj, "status", "conditions", default=[])]
    condition = ",".join(conds) or "Pending"
    if _g(obj, "status", "certificate"):
        condition += ",Issued"
    exp = spec.get("expirationSeconds")
    return [
        obj["metadata"]["name"], age(obj, now), spec.get("signerName", ""),
        spec.get("username", ""), human_duration(exp) if exp else "<none>", condition,
    ]  # fmt: skip


def _lease_cells(obj: JSON, now: float) -> list[Any]:
    holder = _g(obj, "spec", "holderIdentity", default="")
    return [obj["metadata"]["name"], holder, age(obj, now)]


def _webhook_configuration_cells(obj: JSON, now: float) -> list[Any]:
    webhooks = obj.get("webhooks")
    count = len(webhooks) if isinstance(webhooks, list) else 0
    return [obj["metadata"]["name"], count, age(obj, now)]


def _event_cells(obj: JSON, now: float) -> list[Any]:
    last = epoch_of(obj.get("lastTimestamp") or obj.get("eventTime"))
    inv = obj.get("involvedObject") or {}
    return [
        human_duration(now - last) if last is not None else "<unknown>", obj.get("type", ""),
        obj.get("reason", ""), f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
        obj.get("message", ""),
    ]  # fmt: skip


def _crd_cells(obj: JSON, now: float) -> list[Any]:
    return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp", "")]


def _apiservice_cells(obj: JSON, now: float) -> list[Any]:
    service = _g(obj, "spec", "service")
    shown = f"{service.get('namespace', '')}/{service.get('name', '')}" if service else "Local"
    available = "Unknown"
    for cond in _g(obj, "status", "conditions", default=[]):
        if cond.get("type") == "Available":
            status, reason = str(cond.get("status", "")), cond.get("reason")
            available = status if status == "True" or not reason else f"{status} ({reason})"
    return [obj["metadata"]["name"], shown, available, age(obj, now)]


def _sa_cells(obj: JSON, now: float) -> list[Any]:
    return [obj["metadata"]["name"], len(obj.get("secrets") or []), age(obj, now)]


_BUILTIN: dict[tuple[str, str], tuple[list[JSON], Any]] = {
    ("", "pods"): (
        [_NAME_COL, _col("Ready"), _col("Status"), _col("Restarts", "string"), _AGE,
         _col("IP", priority=1), _col("Node", priority=1), _col("Nominated Node", priority=1),
         _col("Readiness Gates", priority=1)],
        _pod_cells,
    ),
    ("apps", "deployments"): (
        [_NAME_COL, _col("Ready"), _col("Up-to-date", "integer"), _col("Available", "integer"),
         _AGE, _col("Containers", priority=1), _col("Images", priority=1),
         _col("Selector", priority=1)],
        _deploy_cells,
    ),
    ("apps", "statefulsets"): (
        [_NAME_COL, _col("Ready"), _AGE, _col("Containers", priority=1),
         _col("Images", priority=1)],
        _sts_cells,
    ),
    ("apps", "replicasets"): (
        [_NAME_COL, _col("Desired", "integer"), _col("Current", "integer"),
         _col("Ready", "integer"), _AGE, _col("Containers", priority=1),
         _col("Images", priority=1), _col("Selector", priority=1)],
        _rs_cells,
    ),
    ("apps", "daemonsets"): (
        [_NAME_COL, _col("Desired", "integer"), _col("Current", "integer"),
         _col("Ready", "integer"), _col("Up-to-date", "integer"), _col("Available", "integer"),
         _col("Node Selector"), _AGE, _col("Containers", priority=1),
         _col("Images", priority=1), _col("Selector", priority=1)],
        _ds_cells,
    ),
    ("batch", "jobs"): (
        [_NAME_COL, _col("Status"), _col("Completions"), _col("Duration"), _AGE,
         _col("Containers", priority=1), _col("Images", priority=1),
         _col("Selector", priority=1)],
        _job_cells,
    ),
    ("", "namespaces"): ([_NAME_COL, _col("Status"), _AGE], _ns_cells),
    ("", "configmaps"): ([_NAME_COL, _col("Data", "integer"), _AGE], _cm_cells),
    ("", "secrets"): ([_NAME_COL, _col("Type"), _col("Data", "integer"), _AGE], _secret_cells),
    ("", "serviceaccounts"): ([_NAME_COL, _col("Secrets", "integer"), _AGE], _sa_cells),
    ("", "services"): (
        [_NAME_COL, _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"),
         _AGE, _col("Selector", priority=1)],
        _svc_cells,
    ),
    ("", "nodes"): (
        [_NAME_COL, _col("Status"), _col("Roles"), _AGE, _col("Version"),
         _col("Internal-IP", priority=1), _col("External-IP", priority=1),
         _col("OS-Image", priority=1), _col("Kernel-Version", priority=1),
         _col("Container-Runtime", priority=1)],
        _node_cells,
    ),
    ("", "events"): (
        [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
        _event_cells,
    ),
    ("certificates.k8s.io", "certificatesigningrequests"): (
        [_NAME_COL, _AGE, _col("SignerName"), _col("Requestor"), _col("RequestedDuration"),
         _col("Condition")],
        _csr_cells,
    ),
    ("coordination.k8s.io", "leases"): ([_NAME_COL, _col("Holder"), _AGE], _lease_cells),
    **{
        ("admissionregistration.k8s.io", resource): (
            [_NAME_COL, _col("Webhooks", "integer"), _AGE], _webhook_configuration_cells
        )
        for resource in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
    },
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        [_NAME_COL, _col("Created At", "date")],
        _crd_cells,
    ),
    ("apiregistration.k8s.io", "apiservices"): (
        [_NAME_COL,
         _col("Service", desc="The reference to the service that hosts this API endpoint."),
         _col("Available", desc="Whether this service is available."), _AGE],
        _apiservice_cells,
    ),
}  # fmt: skip


def attach_builtin_columns(rt: ResourceType) -> None:
    entry = _BUILTIN.get(rt.group_resource)
    if entry is not None:
        rt.table_columns, rt.table_cells = entry


# --- JSONPath (the subset CRD printer columns use) ---

_TOKEN = re.compile(
    r"\.([A-Za-z0-9_\-]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]"
)


def jsonpath(obj: Any, path: str) -> list[Any]:
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    current = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            return []
        pos = m.end()
        nxt: list[Any] = []
        for item in current:
            if m.group(1) is not None:
                if isinstance(item, dict) and m.group(1) in item:
                    nxt.append(item[m.group(1)])
            elif m.group(2) is not None:
                if isinstance(item, list):
                    if m.group(2) == "*":
                        nxt.extend(item)
                    elif int(m.group(2)) < len(item):
                        nxt.append(item[int(m.group(2))])
            elif isinstance(item, list):
                key, want = m.group(3), m.group(4)
                for el in item:
                    value: Any = el
                    for k in key.split("."):
                        value = value.get(k) if isinstance(value, dict) else None
                    if value is not None and str(value) == want:
                        nxt.append(el)
        current = nxt
    return current


def _cell_value(col: JSON, obj: JSON, now: float) -> Any:
    values = jsonpath(obj, col.get("jsonPath", ""))
    if not values:
        return None
    value = values[0]
    if col.get("type") == "date" and isinstance(value, str):
        created = epoch_of(value)
        return human_duration(now - created) if created is not None else value
    if isinstance(value, dict | list):
        import json

        return json.dumps(value, separators=(",", ":"))
    return value


def build_table(
    rt: ResourceType,
    objects: list[JSON],
    list_meta: JSON,
    include_object: str,
    now: float,
) -> JSON:
    if rt.printer_columns:
        columns: list[JSON] = [_NAME_COL]
        for col in rt.printer_columns:
            columns.append(
                {
                    "name": col["name"],
                    "type": col.get("type", "string"),
                    "format": col.get("format", ""),
                    "description": col.get("description", ""),
                    "priority": col.get("priority", 0),
                }
            )
    elif rt.table_columns:
        columns = rt.table_columns
    else:
        columns = [_NAME_COL, {**_AGE, "type": "date"}]
    rows = []
    for obj in objects:
        if rt.printer_columns:
            cells = [obj["metadata"]["name"]] + [
                _cell_value(c, obj, now) for c in rt.printer_columns
            ]
        elif rt.table_cells is not None:
            cells = rt.table_cells(obj, now)
        else:
            cells = [obj["metadata"]["name"], age(obj, now)]
        row: JSON = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    }
