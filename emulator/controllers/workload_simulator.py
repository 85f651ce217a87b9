"""Stands in for the member's kube-controller-manager, scheduler and kubelets.

After `knobs.workload_ready_delay`, workloads look as a healthy cluster reports them:
Deployments, StatefulSets, DaemonSets, ReplicaSets and Jobs get a ready/complete status
for their current generation, Pods run on a node with an IP, LoadBalancer Services get an
ingress IP and PersistentVolumeClaims are Bound. With `knobs.simulate_pods`, Deployments
get a ReplicaSet and ReplicaSets get Pods, so node and resource summaries have data.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Awaitable, Callable

from emulator.controllers import ControllerContext, run_all, tolerate
from emulator.controllers.subscription import Subscription, object_key, split_key
from emulator.controllers.workqueue import WorkQueue
from emulator.errors import ApiError
from emulator.loopback import JSON
from emulator.timefmt import rfc3339

Status = Callable[[ControllerContext, JSON, "Nodes"], JSON | None]


class Nodes:
    def __init__(self, nodes: Subscription) -> None:
        self.nodes = nodes

    def names(self, selector: dict[str, str] | None = None) -> list[str]:
        out = []
        for node in self.nodes.items():
            labels = node.get("metadata", {}).get("labels") or {}
            if all(labels.get(k) == v for k, v in (selector or {}).items()):
                out.append(node["metadata"]["name"])
        return sorted(out)


def _replicas(obj: JSON) -> int:
    value = obj.get("spec", {}).get("replicas")
    return 1 if value is None else int(value)


def _generation(obj: JSON) -> int:
    return int(obj.get("metadata", {}).get("generation", 1))


def template_hash(obj: JSON) -> str:
    digest = hashlib.sha256(
        json.dumps(obj.get("spec", {}).get("template", {}), sort_keys=True).encode()
    ).hexdigest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[int(digest[i : i + 2], 16) % len(alphabet)] for i in range(0, 20, 2))


def deployment_status(ctx: ControllerContext, obj: JSON, _nodes: Nodes) -> JSON:
    n = _replicas(obj)
    now = rfc3339(ctx.clock())
    rs_name = f"{obj['metadata']['name']}-{template_hash(obj)}"
    status: JSON = {"observedGeneration": _generation(obj)}
    if n:
        status.update(replicas=n, updatedReplicas=n, readyReplicas=n, availableReplicas=n)
    status["conditions"] = [
        {
            "type": "Available",
            "status": "True",
            "lastUpdateTime": now,
            "lastTransitionTime": now,
            "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability.",
        },
        {
            "type": "Progressing",
            "status": "True",
            "lastUpdateTime": now,
            "lastTransitionTime": now,
            "reason": "NewReplicaSetAvailable",
            "message": f'ReplicaSet "{rs_name}" has successfully progressed.',
        },
    ]
    return status


def statefulset_status(_ctx: ControllerContext, obj: JSON, _nodes: Nodes) -> JSON:
    n = _replicas(obj)
    revision = f"{obj['metadata']['name']}-{template_hash(obj)[:10]}"
    status: JSON = {
        "observedGeneration": _generation(obj),
        "replicas": n,
        "currentRevision": revision,
        "updateRevision": revision,
        "collisionCount": 0,
    }
    if n:
        status.update(readyReplicas=n, currentReplicas=n, updatedReplicas=n, availableReplicas=n)
    else:
        status["availableReplicas"] = 0
    return status


def daemonset_status(_ctx: ControllerContext, obj: JSON, nodes: Nodes) -> JSON:
    selector = obj.get("spec", {}).get("template", {}).get("spec", {}).get("nodeSelector")
    n = len(nodes.names(selector))
    status: JSON = {
        "observedGeneration": _generation(obj),
        "currentNumberScheduled": n,
        "desiredNumberScheduled": n,
        "numberMisscheduled": 0,
        "numberReady": n,
    }
    if n:
        status.update(updatedNumberScheduled=n, numberAvailable=n)
    return status


def replicaset_status(_ctx: ControllerContext, obj: JSON, _nodes: Nodes) -> JSON:
    n = _replicas(obj)
    status: JSON = {"observedGeneration": _generation(obj), "replicas": n}
    if n:
        status.update(fullyLabeledReplicas=n, readyReplicas=n, availableReplicas=n)
    return status


def job_status(ctx: ControllerContext, obj: JSON, _nodes: Nodes) -> JSON | None:
    previous = obj.get("status") or {}
    if any(c.get("type") == "Complete" for c in previous.get("conditions") or []):
        return None
    spec = obj.get("spec", {})
    if spec.get("suspend"):
        return None
    completions = spec.get("completions")
    succeeded = 1 if completions is None else int(completions)
    now = rfc3339(ctx.clock())
    reached = {
        "status": "True",
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": "CompletionsReached",
        "message": "Reached expected number of succeeded pods",
    }
    return {
        "startTime": previous.get("startTime") or now,
        "completionTime": now,
        "succeeded": succeeded,
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
        "conditions": [{"type": "SuccessCriteriaMet", **reached}, {"type": "Complete", **reached}],
    }


def _ip(seed: str, prefix: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return f"{prefix}.{digest[0]}.{max(digest[1], 2) % 254 + 1}"


def pod_status(ctx: ControllerContext, obj: JSON, nodes: Nodes) -> JSON | None:
    if obj.get("status", {}).get("phase") in ("Running", "Succeeded", "Failed"):
        return None
    now = rfc3339(ctx.clock())
    uid = obj["metadata"].get("uid", obj["metadata"]["name"])
    pod_ip = _ip(uid, "10.244")
    node = obj.get("spec", {}).get("nodeName") or ""
    host_ip = _ip(node, "172.18") if node else ""
    containers = obj.get("spec", {}).get("containers") or []
    condition_types = (
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    )
    status: JSON = {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for t in condition_types
        ],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "qosClass": "BestEffort",
        "containerStatuses": [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": f"{c.get('image', '')}@sha256:{hashlib.sha256(str(c.get('image')).encode()).hexdigest()}",
                "containerID": f"containerd://{hashlib.sha256((uid + c.get('name', '')).encode()).hexdigest()}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in containers
        ],
    }
    if host_ip:
        status["hostIP"] = host_ip
        status["hostIPs"] = [{"ip": host_ip}]
    return status


def service_status(_ctx: ControllerContext, obj: JSON, _nodes: Nodes) -> JSON | None:
    if obj.get("spec", {}).get("type") != "LoadBalancer":
        return None
    ingress = obj.get("status", {}).get("loadBalancer", {}).get("ingress")
    if ingress:
        return None
    ip = _ip(obj["metadata"].get("uid", obj["metadata"]["name"]), "172.19")
    return {"loadBalancer": {"ingress": [{"ip": ip, "ipMode": "VIP"}]}}


def pvc_status(_ctx: ControllerContext, obj: JSON, _nodes: Nodes) -> JSON | None:
    if obj.get("status", {}).get("phase") == "Bound":
        return None
    spec = obj.get("spec", {})
    status: JSON = {"phase": "Bound", "accessModes": list(spec.get("accessModes") or [])}
    storage = spec.get("resources", {}).get("requests", {}).get("storage")
    if storage:
        status["capacity"] = {"storage": storage}
    return status


# resource -> (API group, its status); every one is served as v1.
KINDS: dict[str, tuple[str, Status]] = {
    "deployments": ("apps", deployment_status),
    "statefulsets": ("apps", statefulset_status),
    "daemonsets": ("apps", daemonset_status),
    "replicasets": ("apps", replicaset_status),
    "jobs": ("batch", job_status),
    "pods": ("", pod_status),
    "services": ("", service_status),
    "persistentvolumeclaims": ("", pvc_status),
}


def _without_times(status: JSON) -> JSON:
    """Compare statuses ignoring timestamps, so a settled object is not rewritten."""
    text = json.dumps(status, sort_keys=True)
    for key in ("lastUpdateTime", "lastTransitionTime", "lastProbeTime", "startTime", "startedAt"):
        text = text.replace(key, "")
    data: JSON = json.loads(text)
    for condition in data.get("conditions") or []:
        condition.pop("", None)
    return data


async def run(ctx: ControllerContext) -> None:
    nodes = Nodes(Subscription(ctx.storage, ("", "nodes")))
    jobs = [nodes.nodes.run()]
    kinds: dict[str, Subscription] = {}
    for resource, (group, status_fn) in KINDS.items():
        prefix = f"/apis/{group}/v1" if group else "/api/v1"
        objects = Subscription(ctx.storage, (group, resource))
        kinds[resource] = objects
        queue = WorkQueue(
            _reconciler(ctx, resource, prefix, status_fn, objects, nodes, kinds),
            retry_delay=ctx.knobs.retry_delay,
        )
        objects.add_handler(_delayed_enqueue(ctx, queue))
        jobs += [objects.run(), queue.run()]
    await run_all(*jobs)


def _delayed_enqueue(ctx: ControllerContext, queue: WorkQueue) -> Callable[[str, JSON], None]:
    def handler(event_type: str, obj: JSON) -> None:
        if event_type != "DELETED":
            queue.add_after(object_key(obj), ctx.knobs.workload_ready_delay)

    return handler


def _reconciler(
    ctx: ControllerContext,
    resource: str,
    prefix: str,
    status_fn: Status,
    objects: Subscription,
    nodes: Nodes,
    kinds: dict[str, Subscription],
) -> Callable[[str], Awaitable[None]]:
    async def reconcile(key: str) -> None:
        obj = objects.get(key)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        namespace, name = split_key(key)
        path = f"{prefix}/namespaces/{namespace}/{resource}/{name}"
        if resource == "pods" and not obj.get("spec", {}).get("nodeName"):
            obj = await _schedule(ctx, obj, path, nodes) or obj
        if ctx.knobs.simulate_pods and resource == "deployments":
            await _ensure_replicaset(ctx, obj, kinds["replicasets"])
        if ctx.knobs.simulate_pods and resource == "replicasets":
            await _ensure_pods(ctx, obj, kinds["pods"], nodes)
        status = status_fn(ctx, obj, nodes)
        if status is None or _without_times(status) == _without_times(obj.get("status") or {}):
            return
        updated = copy.deepcopy(obj)
        updated["status"] = status
        await tolerate(ctx.api.update(f"{path}/status", updated), 404)

    return reconcile


async def _schedule(ctx: ControllerContext, pod: JSON, path: str, nodes: Nodes) -> JSON | None:
    names = nodes.names(pod.get("spec", {}).get("nodeSelector"))
    if not names:
        return None
    index = int(hashlib.sha256(pod["metadata"]["name"].encode()).hexdigest(), 16) % len(names)
    updated = copy.deepcopy(pod)
    updated["spec"]["nodeName"] = names[index]
    try:
        return await ctx.api.update(path, updated)
    except ApiError:
        # A server that keeps pod specs immutable refuses; the pod runs unscheduled then.
        return None


def _owner(obj: JSON, kind: str) -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"].get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


async def _ensure_replicaset(
    ctx: ControllerContext, deployment: JSON, replicasets: Subscription
) -> None:
    meta = deployment["metadata"]
    namespace = meta.get("namespace", "default")
    pod_hash = template_hash(deployment)
    name = f"{meta['name']}-{pod_hash}"
    spec = deployment.get("spec", {})
    template = copy.deepcopy(spec.get("template") or {})
    template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = pod_hash
    selector = copy.deepcopy(spec.get("selector") or {})
    selector.setdefault("matchLabels", {})["pod-template-hash"] = pod_hash
    replicas = _replicas(deployment)
    path = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
    for rs in replicasets.owned_by(namespace, meta.get("uid", "")):
        wanted = replicas if rs["metadata"]["name"] == name else 0
        if _replicas(rs) != wanted:
            updated = copy.deepcopy(rs)
            updated["spec"]["replicas"] = wanted
            await ctx.api.update(f"{path}/{rs['metadata']['name']}", updated)
    if replicasets.get(f"{namespace}/{name}") is not None:
        return
    body: JSON = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(template["metadata"]["labels"]),
            "ownerReferences": [_owner(deployment, "Deployment")],
        },
        "spec": {"replicas": replicas, "selector": selector, "template": template},
    }
    await tolerate(ctx.api.create(path, body), 409)


async def _ensure_pods(ctx: ControllerContext, rs: JSON, pods: Subscription, nodes: Nodes) -> None:
    meta = rs["metadata"]
    namespace = meta.get("namespace", "default")
    owned = pods.owned_by(namespace, meta.get("uid", ""))
    wanted = _replicas(rs)
    path = f"/api/v1/namespaces/{namespace}/pods"
    for pod in owned[wanted:]:
        await tolerate(ctx.api.delete(f"{path}/{pod['metadata']['name']}"), 404)
    template = rs.get("spec", {}).get("template") or {}
    names = nodes.names(template.get("spec", {}).get("nodeSelector"))
    for index in range(len(owned), wanted):
        pod_meta = copy.deepcopy(template.get("metadata") or {})
        pod_meta.pop("name", None)
        pod_meta.update(
            generateName=f"{meta['name']}-",
            namespace=namespace,
            ownerReferences=[_owner(rs, "ReplicaSet")],
        )
        pod_spec = copy.deepcopy(template.get("spec") or {})
        if names:
            pod_spec["nodeName"] = names[index % len(names)]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}
        await tolerate(ctx.api.create(path, pod), 409, 422)
