"""metrics.k8s.io for the member emulator, registered as metrics-server registers it: an
aggregated API server of its own (HTTPS on 127.0.0.1), behind the Service
kube-system/metrics-server and the APIService v1beta1.metrics.k8s.io (insecureSkipTLSVerify, as
metrics-server's manifests have it), with the ClusterRole system:aggregated-metrics-reader that
aggregates to view, edit and admin.

Like metrics-server it trusts only the front proxy (the aggregation layer's client certificate,
checked against the requestheader CA, naming the user in X-Remote-* headers) and delegates
authorization to the API server (a SubjectAccessReview there; asked of the member's authorizer
directly here).

Usage is deterministic, so that what `kubectl top` or an HPA computes from it can be known:
each container of a running pod uses what the pod's annotations
`metrics.emulator.karmada-pull-agent.dev/cpu` / `.../memory` say (a quantity, for every
container), or else half its resource request, or else a small amount derived from its name; a
node uses 100m CPU and 512Mi plus what its pods use. CPU is reported in nanocores and memory in
KiB, as metrics-server writes them.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cryptography import x509

from . import errors
from .apiserver import error_response
from .errors import ApiError
from .https import HttpsServer
from .pki import CertificateAuthority
from .rbac import forbidden_for
from .registry import JSON
from .requestheader import RequestHeaderConfig, UntrustedProxyError
from .requestinfo import parse_request_info
from .selectors import parse_label_selector
from .storage import Storage
from .timefmt import rfc3339
from .wire import ApiRequest, ApiResponse

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
NAMESPACE, SERVICE = "kube-system", "metrics-server"
APISERVICE = f"{VERSION}.{GROUP}"
CPU_ANNOTATION = "metrics.emulator.karmada-pull-agent.dev/cpu"
MEMORY_ANNOTATION = "metrics.emulator.karmada-pull-agent.dev/memory"
WINDOW = "15s"
NODE_BASE_MILLICORES, NODE_BASE_BYTES = 100, 512 * 1024 * 1024
_SUFFIXES = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
}  # fmt: skip
_dumps = json.JSONEncoder(separators=(",", ":")).encode


def cpu_millicores(quantity: str) -> int:
    text = str(quantity).strip()
    if text.endswith("n"):
        return int(float(text[:-1]) / 1_000_000)
    if text.endswith("u"):
        return int(float(text[:-1]) / 1000)
    if text.endswith("m"):
        return int(float(text[:-1]))
    return int(float(text) * 1000)


def memory_bytes(quantity: str) -> int:
    text = str(quantity).strip()
    for suffix, factor in _SUFFIXES.items():
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return int(float(text[: -len(suffix)]) * factor)
    return int(float(text))


def _derived(seed: str, low: int, span: int) -> int:
    return low + int.from_bytes(hashlib.sha256(seed.encode()).digest()[:4], "big") % span


def container_usage(pod: JSON, container: JSON) -> tuple[int, int]:
    """(millicores, bytes) a running container uses."""
    meta = pod["metadata"]
    annotations = meta.get("annotations") or {}
    requests = (container.get("resources") or {}).get("requests") or {}
    seed = f"{meta.get('namespace', '')}/{meta['name']}/{container.get('name', '')}"
    if CPU_ANNOTATION in annotations:
        cpu = cpu_millicores(annotations[CPU_ANNOTATION])
    elif "cpu" in requests:
        cpu = cpu_millicores(requests["cpu"]) // 2
    else:
        cpu = _derived(seed, 1, 50)
    if MEMORY_ANNOTATION in annotations:
        memory = memory_bytes(annotations[MEMORY_ANNOTATION])
    elif "memory" in requests:
        memory = memory_bytes(requests["memory"]) // 2
    else:
        memory = _derived(seed, 8, 56) * 2**20
    return cpu, memory


def _usage(millicores: int, size: int) -> JSON:
    return {"cpu": f"{millicores * 1_000_000}n", "memory": f"{size // 1024}Ki"}


def _running(pod: JSON) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and bool(
        (pod.get("spec") or {}).get("nodeName")
    )


class MetricsApi:
    """The metrics.k8s.io requests, over the member's storage."""

    def __init__(
        self,
        storage: Storage,
        requestheader: RequestHeaderConfig,
        authorizer: Any,
        clock: Callable[[], float],
    ) -> None:
        self.storage = storage
        self.requestheader = requestheader
        self.authorizer = authorizer
        self.clock = clock

    async def handle(self, req: ApiRequest) -> ApiResponse:
        try:
            return await self._handle(req)
        except ApiError as exc:
            return error_response(exc)

    async def _handle(self, req: ApiRequest) -> ApiResponse:
        if req.peer_cert_der is None:
            raise errors.unauthorized()
        try:
            user = self.requestheader.authenticate(
                req, x509.load_der_x509_certificate(req.peer_cert_der)
            )
        except UntrustedProxyError:
            user = None
        if user is None:
            raise errors.unauthorized()
        attrs = parse_request_info(req)
        if self.authorizer is not None:
            verdict = self.authorizer.authorize(user, attrs)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            allowed, reason = verdict
            if not allowed:
                raise forbidden_for(user.name, attrs, reason)
        path = req.path.rstrip("/")
        if path == "/apis":
            return _json(_group_list())
        if path == f"/apis/{GROUP}":
            return _json(_group())
        if path == f"/apis/{GROUP_VERSION}":
            return _json(_resource_list())
        if not attrs.is_resource_request or attrs.api_group != GROUP:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if attrs.verb not in ("get", "list"):
            raise errors.method_not_allowed()
        if attrs.resource == "nodes" and not attrs.namespace:
            return _json(self._nodes(attrs.name, req))
        if attrs.resource == "pods":
            return _json(self._pods(attrs.namespace, attrs.name, req))
        raise ApiError(404, "NotFound", "the server could not find the requested resource", {})

    def _stamp(self) -> str:
        return rfc3339(datetime.fromtimestamp(int(self.clock()), UTC))

    def _pod_metrics(self, pod: JSON) -> JSON:
        meta = pod["metadata"]
        containers = []
        for container in (pod.get("spec") or {}).get("containers") or []:
            cpu, memory = container_usage(pod, container)
            containers.append({"name": container.get("name", ""), "usage": _usage(cpu, memory)})
        out_meta: JSON = {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "creationTimestamp": self._stamp(),
        }
        if meta.get("labels"):
            out_meta["labels"] = dict(meta["labels"])
        return {
            "kind": "PodMetrics",
            "apiVersion": GROUP_VERSION,
            "metadata": out_meta,
            "timestamp": self._stamp(),
            "window": WINDOW,
            "containers": containers,
        }

    def _pods(self, namespace: str, name: str, req: ApiRequest) -> JSON:
        pods = [p for p in self.storage.list(("", "pods"), namespace or None) if _running(p)]
        if name:
            for pod in pods:
                if pod["metadata"]["name"] == name:
                    return self._pod_metrics(pod)
            raise errors.not_found(GROUP, "pods", name)
        selector = parse_label_selector(req.param("labelSelector"))
        items = [
            self._pod_metrics(p)
            for p in pods
            if selector.matches(p["metadata"].get("labels") or {})
        ]
        return {"kind": "PodMetricsList", "apiVersion": GROUP_VERSION, "metadata": {},
                "items": items}  # fmt: skip

    def _node_metrics(self, node: JSON, pods: list[JSON]) -> JSON:
        name = node["metadata"]["name"]
        cpu, memory = NODE_BASE_MILLICORES, NODE_BASE_BYTES
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") == name:
                for container in (pod.get("spec") or {}).get("containers") or []:
                    used = container_usage(pod, container)
                    cpu, memory = cpu + used[0], memory + used[1]
        meta: JSON = {"name": name, "creationTimestamp": self._stamp()}
        if node["metadata"].get("labels"):
            meta["labels"] = dict(node["metadata"]["labels"])
        return {
            "kind": "NodeMetrics",
            "apiVersion": GROUP_VERSION,
            "metadata": meta,
            "timestamp": self._stamp(),
            "window": WINDOW,
            "usage": _usage(cpu, memory),
        }

    def _nodes(self, name: str, req: ApiRequest) -> JSON:
        pods = [p for p in self.storage.list(("", "pods"), None) if _running(p)]
        nodes = self.storage.list(("", "nodes"), None)
        if name:
            for node in nodes:
                if node["metadata"]["name"] == name:
                    return self._node_metrics(node, pods)
            raise errors.not_found(GROUP, "nodes", name)
        selector = parse_label_selector(req.param("labelSelector"))
        items = [
            self._node_metrics(n, pods)
            for n in nodes
            if selector.matches(n["metadata"].get("labels") or {})
        ]
        return {"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION, "metadata": {},
                "items": items}  # fmt: skip


def _json(body: JSON) -> ApiResponse:
    return ApiResponse(200, _dumps(body).encode(), {"content-type": "application/json"})


def _group() -> JSON:
    version = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version],
            "preferredVersion": version}  # fmt: skip


def _group_list() -> JSON:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group()]}


def _resource_list() -> JSON:
    def entry(name: str, kind: str, namespaced: bool) -> JSON:
        return {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
                "verbs": ["get", "list"]}  # fmt: skip

    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [entry("nodes", "NodeMetrics", False), entry("pods", "PodMetrics", True)],
    }


def registration_objects(port: int = 443) -> list[tuple[str, JSON]]:
    """(collection path, object) of what metrics-server's manifests install for its API."""
    rbac = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    reader = {
        "metadata": {
            "name": "system:aggregated-metrics-reader",
            "labels": {
                f"rbac.authorization.k8s.io/aggregate-to-{role}": "true"
                for role in ("view", "edit", "admin")
            },
        },
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": ["pods", "nodes"],
                "verbs": ["get", "list", "watch"],
            }
        ],
    }
    service = {
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {"k8s-app": SERVICE}},
        "spec": {
            "selector": {"k8s-app": SERVICE},
            "ports": [{"name": "https", "port": port, "protocol": "TCP", "targetPort": "https"}],
        },
    }
    apiservice = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": APISERVICE, "labels": {"k8s-app": SERVICE}},
        "spec": {
            "group": GROUP,
            "version": VERSION,
            "service": {"name": SERVICE, "namespace": NAMESPACE, "port": port},
            "insecureSkipTLSVerify": True,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }
    return [
        (rbac, reader),
        (f"/api/v1/namespaces/{NAMESPACE}/services", service),
        ("/apis/apiregistration.k8s.io/v1/apiservices", apiservice),
    ]


def metrics_https_server(
    api: MetricsApi, ca: CertificateAuthority, requestheader_ca_pem: bytes
) -> HttpsServer:
    """The HTTPS server metrics-server is: a serving certificate for its Service's name, client
    certificates (the front proxy's) verified against the requestheader CA."""
    cert, key = ca.issue(
        SERVICE,
        dns_names=(f"{SERVICE}.{NAMESPACE}.svc", f"{SERVICE}.{NAMESPACE}.svc.cluster.local"),
        ips=("127.0.0.1",),
        usage="server",
    )
    return HttpsServer(api, cert, key, requestheader_ca_pem)
