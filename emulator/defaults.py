"""Defaulting of built-in kinds: the values kube-apiserver fills in that users see most.

These mirror the SetDefaults_* functions of kube's API groups (and, for Pods, the admission
plugins that always run: ServiceAccount, Priority, DefaultTolerationSeconds). Each defaulter
changes the object in place and only fills fields that are absent.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
Defaulter = Callable[[Obj], None]

_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
_DEFAULT_MODE = 420  # 0644
_TOLERATION_SECONDS = 300


def _dict(parent: Obj, key: str) -> Obj:
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def _dicts(parent: Any, key: str) -> list[Obj]:
    if not isinstance(parent, dict):
        return []
    value = parent.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def image_pull_policy(image: str) -> str:
    """Always for ":latest" or untagged images, IfNotPresent otherwise (digests count as tags)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    http = probe.get("httpGet")
    if isinstance(http, dict):
        http.setdefault("scheme", "HTTP")
        http.setdefault("path", "/")


def _env(container: Obj) -> None:
    for env in _dicts(container, "env"):
        source = env.get("valueFrom")
        if isinstance(source, dict) and isinstance(source.get("fieldRef"), dict):
            source["fieldRef"].setdefault("apiVersion", "v1")


def _container(container: Obj) -> None:
    image = container.get("image")
    if isinstance(image, str) and image and "imagePullPolicy" not in container:
        container["imagePullPolicy"] = image_pull_policy(image)
    container.setdefault("terminationMessagePath", _TERMINATION_MESSAGE_PATH)
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})
    for port in _dicts(container, "ports"):
        port.setdefault("protocol", "TCP")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(container.get(key))
    _env(container)


def _volume(volume: Obj) -> None:
    for key in ("secret", "configMap", "downwardAPI", "projected"):
        source = volume.get(key)
        if isinstance(source, dict):
            source.setdefault("defaultMode", _DEFAULT_MODE)
    empty_dir = volume.get("emptyDir")
    if empty_dir is None and "emptyDir" in volume:
        volume["emptyDir"] = {}


def pod_spec(spec: Obj) -> None:
    """SetDefaults_PodSpec and the container defaults, for Pods and pod templates."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in _dicts(spec, key):
            _container(container)
    for volume in _dicts(spec, "volumes"):
        _volume(volume)


def _template(owner_spec: Any) -> None:
    if isinstance(owner_spec, dict):
        template = owner_spec.get("template")
        if isinstance(template, dict):
            pod_spec(_dict(template, "spec"))


def pod(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    pod_spec(spec)
    # Admission plugins every cluster runs: ServiceAccount, Priority, DefaultTolerationSeconds.
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec.setdefault("serviceAccountName", account)
    spec.setdefault("serviceAccount", account)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    if isinstance(tolerations, list):
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(isinstance(t, dict) and t.get("key") == key for t in tolerations):
                tolerations.append(
                    {
                        "key": key,
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": _TOLERATION_SECONDS,
                    }
                )


def deployment(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    spec.setdefault("replicas", 1)
    strategy = _dict(spec, "strategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _template(spec)


def stateful_set(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = _dict(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        _dict(strategy, "rollingUpdate").setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    retention = _dict(spec, "persistentVolumeClaimRetentionPolicy")
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    for claim in _dicts(spec, "volumeClaimTemplates"):
        _dict(claim, "spec").setdefault("volumeMode", "Filesystem")
    _template(spec)


def daemon_set(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    strategy = _dict(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    _template(spec)


def replica_set(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    spec.setdefault("replicas", 1)
    _template(spec)


def job_spec(spec: Obj) -> None:
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    _template(spec)


def job(obj: Obj) -> None:
    job_spec(_dict(obj, "spec"))


def cron_job(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    template = spec.get("jobTemplate")
    if isinstance(template, dict):
        job_spec(_dict(template, "spec"))


def service(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    kind = spec.setdefault("type", "ClusterIP")
    if kind == "ExternalName":
        return
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if kind in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    for port in _dicts(spec, "ports"):
        port.setdefault("protocol", "TCP")
        if "targetPort" not in port and "port" in port:
            port["targetPort"] = port["port"]


def namespace(obj: Obj) -> None:
    name = (obj.get("metadata") or {}).get("name")
    if isinstance(name, str) and name:
        _dict(_dict(obj, "metadata"), "labels").setdefault("kubernetes.io/metadata.name", name)


def secret(obj: Obj) -> None:
    """`stringData` is write-only: kube's conversion of a v1 Secret merges each of its keys
    into `data` (base64, overwriting) on every write, so it is never stored or returned.
    A value that is not a string is left for validation to refuse."""
    string_data = obj.get("stringData")
    if isinstance(string_data, dict) and all(isinstance(v, str) for v in string_data.values()):
        del obj["stringData"]
        if string_data:
            data = _dict(obj, "data")
            for key, value in string_data.items():
                data[key] = base64.b64encode(value.encode()).decode()
    obj.setdefault("type", "Opaque")


def persistent_volume_claim(obj: Obj) -> None:
    _dict(obj, "spec").setdefault("volumeMode", "Filesystem")


def _ports_tcp(items: list[Obj]) -> None:
    for item in items:
        for port in _dicts(item, "ports"):
            port.setdefault("protocol", "TCP")


def endpoints(obj: Obj) -> None:
    _ports_tcp(_dicts(obj, "subsets"))


def endpoint_slice(obj: Obj) -> None:
    for port in _dicts(obj, "ports"):
        port.setdefault("protocol", "TCP")


def _subjects(obj: Obj) -> None:
    for subject in _dicts(obj, "subjects"):
        if subject.get("kind") in ("User", "Group"):
            subject.setdefault("apiGroup", "rbac.authorization.k8s.io")
        elif subject.get("kind") == "ServiceAccount":
            subject.setdefault("apiGroup", "")


def horizontal_pod_autoscaler(obj: Obj) -> None:
    _dict(obj, "spec").setdefault("minReplicas", 1)


def custom_resource_definition(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    names = _dict(spec, "names")
    kind = names.get("kind")
    if isinstance(kind, str) and kind:
        names.setdefault("singular", kind.lower())
        names.setdefault("listKind", kind + "List")
    _dict(spec, "conversion").setdefault("strategy", "None")


_DEFAULTERS: dict[tuple[str, str], Defaulter] = {
    ("", "Pod"): pod,
    ("", "Service"): service,
    ("", "Namespace"): namespace,
    ("", "Secret"): secret,
    ("", "PersistentVolumeClaim"): persistent_volume_claim,
    ("", "Endpoints"): endpoints,
    ("apps", "Deployment"): deployment,
    ("apps", "StatefulSet"): stateful_set,
    ("apps", "DaemonSet"): daemon_set,
    ("apps", "ReplicaSet"): replica_set,
    ("batch", "Job"): job,
    ("batch", "CronJob"): cron_job,
    ("discovery.k8s.io", "EndpointSlice"): endpoint_slice,
    ("rbac.authorization.k8s.io", "RoleBinding"): _subjects,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _subjects,
    ("autoscaling", "HorizontalPodAutoscaler"): horizontal_pod_autoscaler,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): custom_resource_definition,
}


def defaulter_for(group: str, kind: str) -> Defaulter | None:
    return _DEFAULTERS.get((group, kind))
