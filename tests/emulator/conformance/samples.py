"""One realistic object of every built-in kind, in the JSON form a Go client writes for it
(encoding/json of the typed struct: omitempty zero values dropped, value structs such as
`resources: {}`, `status: {}` and a template's `creationTimestamp: null` kept).

`sample(kind, name, namespace)` returns a fresh copy; tests create them through kubectl,
JSON bodies and protobuf bodies and compare what the emulator stores.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

JSON = dict[str, Any]

LABELS = {"app": "web", "tier": "frontend"}
SELECTOR = {"matchLabels": {"app": "web"}}


def _meta(name: str, namespace: str, **extra: Any) -> JSON:
    meta: JSON = {"name": name, "creationTimestamp": None}
    if namespace:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def pod_spec(restart: str = "Always") -> JSON:
    return {
        "volumes": [
            {"name": "config", "configMap": {
                "name": "app-config", "items": [{"key": "a", "path": "a.txt", "mode": 0o440}],
                "defaultMode": 0o644}},
            {"name": "secret", "secret": {"secretName": "app-secret", "optional": True}},
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "token", "projected": {"sources": [
                {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600,
                                         "path": "token"}},
                {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {
                    "apiVersion": "v1", "fieldPath": "metadata.labels"}}]}},
            ], "defaultMode": 0o420}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
        ],
        "initContainers": [{
            "name": "init", "image": "busybox:1.36", "command": ["sh", "-c", "true"],
            "resources": {}, "restartPolicy": "Always",
            "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30,
                             "periodSeconds": 1, "timeoutSeconds": 1, "successThreshold": 1},
        }],
        "containers": [{
            "name": "app",
            "image": "nginx:1.25",
            "args": ["--port=8080"],
            "workingDir": "/srv",
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                      {"name": "metrics", "hostPort": 9100, "containerPort": 9100,
                       "protocol": "TCP"}],
            "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "app-config"}},
                        {"secretRef": {"name": "app-secret", "optional": False}}],
            "env": [
                {"name": "MODE", "value": "prod"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {
                    "containerName": "app", "resource": "limits.cpu", "divisor": "1m"}}},
                {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {
                    "name": "app-secret", "key": "password"}}},
                {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {
                    "name": "app-config", "key": "level", "optional": True}}},
            ],
            "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                          "requests": {"cpu": "100m", "memory": "128Mi"}},
            "volumeMounts": [{"name": "config", "readOnly": True, "mountPath": "/etc/app"},
                             {"name": "scratch", "mountPath": "/tmp", "subPath": "app"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP",
                                          "httpHeaders": [{"name": "X-Probe", "value": "1"}]},
                              "initialDelaySeconds": 5, "timeoutSeconds": 1,
                              "periodSeconds": 10, "successThreshold": 1,
                              "failureThreshold": 3, "terminationGracePeriodSeconds": 10},
            "readinessProbe": {"tcpSocket": {"port": 8080}, "timeoutSeconds": 1,
                               "periodSeconds": 5, "successThreshold": 1,
                               "failureThreshold": 3},
            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}},
                          "postStart": {"sleep": {"seconds": 1}}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
            "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                                "runAsNonRoot": True, "readOnlyRootFilesystem": True,
                                "allowPrivilegeEscalation": False},
        }],
        "restartPolicy": restart,
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "serviceAccountName": "app",
        "automountServiceAccountToken": False,
        "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000,
                            "supplementalGroups": [4000, 5000],
                            "seccompProfile": {"type": "RuntimeDefault"},
                            "sysctls": [{"name": "net.ipv4.ip_local_port_range",
                                         "value": "1024 65535"}]},
        "imagePullSecrets": [{"name": "regcred"}],
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100, "podAffinityTerm": {
                    "labelSelector": SELECTOR, "topologyKey": "kubernetes.io/hostname"}}]},
        },
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "hostAliases": [{"ip": "10.0.0.5", "hostnames": ["db.local"]}],
        "priorityClassName": "high",
        "dnsConfig": {"nameservers": ["10.0.0.10"], "options": [{"name": "ndots", "value": "2"}]},
        "readinessGates": [{"conditionType": "example.com/ready"}],
        "enableServiceLinks": False,
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                       "whenUnsatisfiable": "ScheduleAnyway",
                                       "labelSelector": SELECTOR}],
        "os": {"name": "linux"},
    }  # fmt: skip


def template(restart: str = "Always") -> JSON:
    return {"metadata": {"creationTimestamp": None, "labels": dict(LABELS),
                         "annotations": {"example.com/rev": "7"}},
            "spec": pod_spec(restart)}  # fmt: skip


def _pvc_spec() -> JSON:
    return {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}},
            "storageClassName": "standard", "volumeMode": "Filesystem"}  # fmt: skip


def _deployment(name: str, ns: str) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": _meta(name, ns, labels=dict(LABELS),
                              annotations={"example.com/owner": "team-a"}),
            "spec": {"replicas": 3, "selector": SELECTOR, "template": template(),
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
                     "minReadySeconds": 5, "revisionHistoryLimit": 10,
                     "progressDeadlineSeconds": 600},
            "status": {}}  # fmt: skip


def _statefulset(name: str, ns: str) -> JSON:
    claim = {
        "metadata": {"name": "data", "creationTimestamp": None},
        "spec": _pvc_spec(),
        "status": {},
    }
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta(name, ns),
            "spec": {"replicas": 2, "selector": SELECTOR, "template": template(),
                     "volumeClaimTemplates": [claim], "serviceName": "web",
                     "podManagementPolicy": "Parallel",
                     "updateStrategy": {"type": "RollingUpdate",
                                        "rollingUpdate": {"partition": 0,
                                                          "maxUnavailable": 1}},
                     "revisionHistoryLimit": 10,
                     "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete",
                                                              "whenScaled": "Retain"},
                     "ordinals": {"start": 1}},
            "status": {"replicas": 0, "availableReplicas": 0}}  # fmt: skip


def _daemonset(name: str, ns: str) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta(name, ns),
            "spec": {"selector": SELECTOR, "template": template(),
                     "updateStrategy": {"type": "RollingUpdate",
                                        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                     "minReadySeconds": 10, "revisionHistoryLimit": 10},
            "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                       "desiredNumberScheduled": 0, "numberReady": 0}}  # fmt: skip


def _replicaset(name: str, ns: str) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": _meta(name, ns, labels=dict(LABELS), finalizers=["example.com/keep"]),
            "spec": {"replicas": 1, "selector": SELECTOR, "template": template()},
            "status": {"replicas": 0}}  # fmt: skip


def _job_spec() -> JSON:
    return {"parallelism": 2, "completions": 4, "activeDeadlineSeconds": 600,
            "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [
                    {"type": "DisruptionTarget", "status": "True"}]},
                {"action": "FailJob", "onExitCodes": {
                    "containerName": "app", "operator": "In", "values": [42]}},
            ]},
            "backoffLimit": 6, "template": template("Never"),
            "ttlSecondsAfterFinished": 100, "completionMode": "NonIndexed",
            "suspend": False, "podReplacementPolicy": "Failed"}  # fmt: skip


def _job(name: str, ns: str) -> JSON:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(name, ns),
            "spec": _job_spec(), "status": {}}  # fmt: skip


def _cronjob(name: str, ns: str) -> JSON:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(name, ns),
            "spec": {"schedule": "*/5 * * * *", "timeZone": "Etc/UTC",
                     "startingDeadlineSeconds": 120, "concurrencyPolicy": "Forbid",
                     "suspend": False,
                     "jobTemplate": {"metadata": {"creationTimestamp": None,
                                                  "labels": dict(LABELS)},
                                     "spec": _job_spec()},
                     "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1},
            "status": {}}  # fmt: skip


def _hpa(name: str, ns: str) -> JSON:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": _meta(name, ns),
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                "minReplicas": 2, "maxReplicas": 10,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {
                        "type": "Utilization", "averageUtilization": 70}}},
                    {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {
                        "type": "AverageValue", "averageValue": "100"}}},
                    {"type": "External", "external": {
                        "metric": {"name": "queue", "selector": {"matchLabels": {"q": "jobs"}}},
                        "target": {"type": "Value", "value": "30"}}},
                    {"type": "ContainerResource", "containerResource": {
                        "name": "memory", "container": "app",
                        "target": {"type": "Utilization", "averageUtilization": 80}}},
                ],
                "behavior": {
                    "scaleUp": {"selectPolicy": "Max", "policies": [
                        {"type": "Pods", "value": 4, "periodSeconds": 15}]},
                    "scaleDown": {"stabilizationWindowSeconds": 300, "policies": [
                        {"type": "Percent", "value": 10, "periodSeconds": 60}]},
                },
            },
            "status": {"currentMetrics": None, "desiredReplicas": 0}}  # fmt: skip


_CSR_PEM = b"-----BEGIN CERTIFICATE REQUEST-----\nMIIBrequest\n-----END CERTIFICATE REQUEST-----\n"


def _csr(name: str, ns: str) -> JSON:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": _meta(name, ""),
            "spec": {"request": base64.b64encode(_CSR_PEM).decode(),
                     "signerName": "kubernetes.io/kube-apiserver-client",
                     "expirationSeconds": 86400,
                     "usages": ["digital signature", "key encipherment", "client auth"]},
            "status": {}}  # fmt: skip


def _lease(name: str, ns: str) -> JSON:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": _meta(name, ns),
            "spec": {"holderIdentity": "agent-7f9c_0d3b", "leaseDurationSeconds": 15,
                     "acquireTime": "2024-05-01T10:00:00.000000Z",
                     "renewTime": "2024-05-01T10:00:05.123456Z", "leaseTransitions": 0}}  # fmt: skip


def _endpointslice(name: str, ns: str) -> JSON:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": _meta(name, ns, labels={"kubernetes.io/service-name": "web"}),
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.1.0.4"],
                 "conditions": {"ready": True, "serving": True, "terminating": False},
                 "targetRef": {"kind": "Pod", "namespace": ns, "name": "web-0",
                               "uid": "5f0c7d1e-2a3b-4c5d-8e9f-0a1b2c3d4e5f"},
                 "nodeName": "node-a", "zone": "a",
                 "hints": {"forZones": [{"name": "a"}]}},
                {"addresses": ["10.1.0.5"], "conditions": {"ready": False},
                 "hostname": "web-1"},
            ],
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080},
                      {"name": "grpc", "protocol": "TCP", "port": 9090,
                       "appProtocol": "kubernetes.io/h2c"}]}  # fmt: skip


def _ingress(name: str, ns: str) -> JSON:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": _meta(name, ns, annotations={"example.com/rewrite": "/"}),
            "spec": {"ingressClassName": "nginx",
                     "defaultBackend": {"service": {"name": "default", "port": {"name": "http"}}},
                     "tls": [{"hosts": ["web.example.com"], "secretName": "web-tls"}],
                     "rules": [{"host": "web.example.com", "http": {"paths": [
                         {"path": "/", "pathType": "Prefix", "backend": backend},
                         {"path": "/static", "pathType": "ImplementationSpecific",
                          "backend": {"resource": {"apiGroup": "storage.example.com",
                                                   "kind": "Bucket", "name": "static"}}},
                     ]}}]},
            "status": {"loadBalancer": {}}}  # fmt: skip


def _networkpolicy(name: str, ns: str) -> JSON:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": _meta(name, ns),
            "spec": {"podSelector": SELECTOR,
                     "ingress": [{"ports": [{"protocol": "TCP", "port": 8080},
                                            {"protocol": "TCP", "port": "metrics"}],
                                  "from": [{"namespaceSelector": {"matchLabels": {"team": "a"}},
                                            "podSelector": {"matchExpressions": [
                                                {"key": "role", "operator": "In",
                                                 "values": ["client"]}]}},
                                           {"ipBlock": {"cidr": "172.17.0.0/16",
                                                        "except": ["172.17.1.0/24"]}}]}],
                     "egress": [{"ports": [{"protocol": "UDP", "port": 53, "endPort": 60}],
                                 "to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}],
                     "policyTypes": ["Ingress", "Egress"]}}  # fmt: skip


def _pdb(name: str, ns: str) -> JSON:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(name, ns),
            "spec": {"minAvailable": "50%", "selector": SELECTOR,
                     "unhealthyPodEvictionPolicy": "AlwaysAllow"},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                       "expectedPods": 0}}  # fmt: skip


_RULES = [
    {"verbs": ["get", "list", "watch"], "apiGroups": ["", "apps"],
     "resources": ["pods", "deployments"]},
    {"verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"],
     "resourceNames": ["app-config"]},
]  # fmt: skip


def _role(name: str, ns: str) -> JSON:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": _meta(name, ns), "rules": copy.deepcopy(_RULES)}  # fmt: skip


def _clusterrole(name: str, ns: str) -> JSON:
    rules = [*copy.deepcopy(_RULES), {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": _meta(name, "", labels={"example.com/aggregate": "true"}),
            "rules": rules}  # fmt: skip


def _subjects(ns: str) -> list[JSON]:
    return [{"kind": "ServiceAccount", "name": "app", "namespace": ns or "default"},
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"},
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"}]  # fmt: skip


def _rolebinding(name: str, ns: str) -> JSON:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": _meta(name, ns), "subjects": _subjects(ns),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "web-reader"}}  # fmt: skip


def _clusterrolebinding(name: str, ns: str) -> JSON:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": _meta(name, ""), "subjects": _subjects(""),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "view"}}  # fmt: skip


def _crd(name: str, ns: str) -> JSON:
    group = f"{name}.example.com"
    spec_schema = {
        "type": "object",
        "required": ["size"],
        "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "multipleOf": 0.5},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": 5,
                "x-kubernetes-list-type": "set",
            },
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "port": {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
            },
        },
        "x-kubernetes-validations": [{"rule": "self.size <= 10", "message": "too big"}],
    }
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": _meta(f"widgets.{group}", ""),
            "spec": {"group": group,
                     "names": {"plural": "widgets", "singular": "widget",
                               "shortNames": ["wdg"], "kind": "Widget",
                               "listKind": "WidgetList", "categories": ["all"]},
                     "scope": "Namespaced",
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": spec_schema,
                                       "status": {"type": "object",
                                                  "x-kubernetes-preserve-unknown-fields": True},
                                   }}},
                                   "subresources": {"status": {}, "scale": {
                                       "specReplicasPath": ".spec.size",
                                       "statusReplicasPath": ".status.size"}},
                                   "additionalPrinterColumns": [
                                       {"name": "Size", "type": "integer",
                                        "jsonPath": ".spec.size"}]}],
                     "conversion": {"strategy": "None"}},
            "status": {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": None}}  # fmt: skip


def _namespace(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": _meta(name, "", labels={"team": "a"}), "spec": {}, "status": {}}  # fmt: skip


def _configmap(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, ns),
            "data": {"level": "info", "app.yaml": "port: 8080\n"},
            "binaryData": {"blob": base64.b64encode(b"\x00\x01\xff").decode()}}  # fmt: skip


def _secret(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(name, ns),
            "immutable": True,
            "data": {"password": base64.b64encode(b"s3cr3t\x00").decode()},
            "type": "Opaque"}  # fmt: skip


def _service(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, ns),
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80,
                                "targetPort": "http", "nodePort": 30080},
                               {"name": "grpc", "protocol": "TCP", "appProtocol": "grpc",
                                "port": 9090, "targetPort": 9090}],
                     "selector": {"app": "web"}, "type": "NodePort",
                     "sessionAffinity": "ClientIP",
                     "externalTrafficPolicy": "Local",
                     "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
                     "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                     "internalTrafficPolicy": "Cluster"},
            "status": {"loadBalancer": {}}}  # fmt: skip


def _serviceaccount(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, ns),
            "imagePullSecrets": [{"name": "regcred"}],
            "automountServiceAccountToken": False}  # fmt: skip


def _pod(name: str, ns: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, ns, labels=dict(LABELS)),
        "spec": pod_spec(),
        "status": {},
    }


def _node(name: str, ns: str) -> JSON:
    info = {
        "machineID": "m-1",
        "systemUUID": "u-1",
        "bootID": "b-1",
        "kernelVersion": "6.1.0",
        "osImage": "Debian GNU/Linux 12 (bookworm)",
        "containerRuntimeVersion": "containerd://1.7.13",
        "kubeletVersion": "v1.32.0",
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }
    ready = {
        "type": "Ready",
        "status": "True",
        "lastHeartbeatTime": "2024-05-01T10:00:00Z",
        "lastTransitionTime": "2024-05-01T09:00:00Z",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": _meta(name, "", labels={"kubernetes.io/hostname": name}),
            "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"],
                     "providerID": "kind://docker/kind/node-a",
                     "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "allocatable": {"cpu": "3800m", "memory": "15Gi", "pods": "110"},
                       "conditions": [ready],
                       "addresses": [{"type": "InternalIP", "address": "172.18.0.2"},
                                     {"type": "Hostname", "address": name}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "nodeInfo": info,
                       "images": [{"names": ["nginx:1.25"], "sizeBytes": 70000000}]}}  # fmt: skip


def _event(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Event", "metadata": _meta(name, ns),
            "involvedObject": {"kind": "Pod", "namespace": ns, "name": "web-0",
                               "uid": "5f0c7d1e-2a3b-4c5d-8e9f-0a1b2c3d4e5f",
                               "apiVersion": "v1", "resourceVersion": "42",
                               "fieldPath": "spec.containers{app}"},
            "reason": "Pulled", "message": "Container image pulled",
            "source": {"component": "kubelet", "host": "node-a"},
            "firstTimestamp": "2024-05-01T10:00:00Z", "lastTimestamp": "2024-05-01T10:05:00Z",
            "count": 3, "type": "Normal", "eventTime": None,
            "reportingComponent": "kubelet", "reportingInstance": "node-a"}  # fmt: skip


def _endpoints(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": _meta(name, ns),
            "subsets": [{"addresses": [{"ip": "10.1.0.4", "nodeName": "node-a",
                                        "targetRef": {"kind": "Pod", "namespace": ns,
                                                      "name": "web-0"}}],
                         "notReadyAddresses": [{"ip": "10.1.0.5", "hostname": "web-1"}],
                         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}  # fmt: skip


def _pvc(name: str, ns: str) -> JSON:
    spec = {**_pvc_spec(), "selector": {"matchLabels": {"disk": "ssd"}}}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(name, ns),
            "spec": spec, "status": {}}  # fmt: skip


def _webhook(kind: str) -> JSON:
    hook: JSON = {
        "name": f"{kind.lower()}.example.com",
        "clientConfig": {
            "url": "https://127.0.0.1:9443/hook",
            "caBundle": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode(),
        },
        "rules": [
            {
                "operations": ["CREATE", "UPDATE"],
                "apiGroups": ["example.com"],
                "apiVersions": ["v1"],
                "resources": ["gadgets"],
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": "Ignore",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
        "objectSelector": {},
        "sideEffects": "None",
        "timeoutSeconds": 5,
        "admissionReviewVersions": ["v1"],
        "matchConditions": [
            {"name": "not-system", "expression": "!request.userInfo.username.startsWith('system:')"}
        ],
    }
    if kind == "mutating":
        hook["reinvocationPolicy"] = "IfNeeded"
    return hook


def _mutating(name: str, ns: str) -> JSON:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration", "metadata": _meta(name, ""),
            "webhooks": [_webhook("mutating")]}  # fmt: skip


def _validating(name: str, ns: str) -> JSON:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": _meta(name, ""),
            "webhooks": [_webhook("validating")]}  # fmt: skip


# Kinds with a table that the profiles do not serve (decoded, not stored, by the tests).
def _pv(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": _meta(name, ""),
            "spec": {"capacity": {"storage": "10Gi"},
                     "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1", "fsType": "ext4",
                             "volumeAttributes": {"type": "gp3"},
                             "nodeStageSecretRef": {"name": "creds", "namespace": "kube-system"}},
                     "accessModes": ["ReadWriteOnce"],
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns, "name": "data"},
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "standard",
                     "mountOptions": ["noatime"], "volumeMode": "Filesystem",
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
            "status": {"phase": "Bound", "lastPhaseTransitionTime": "2024-05-01T10:00:00Z"}}  # fmt: skip


def _quota(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": _meta(name, ns),
            "spec": {"hard": {"pods": "10", "requests.cpu": "4"}, "scopes": ["NotBestEffort"],
                     "scopeSelector": {"matchExpressions": [
                         {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
            "status": {"hard": {"pods": "10"}, "used": {"pods": "3"}}}  # fmt: skip


def _limitrange(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": _meta(name, ns),
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "10m"},
                                 "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "100m"},
                                 "maxLimitRequestRatio": {"cpu": "10"}}]}}  # fmt: skip


def _ingressclass(name: str, ns: str) -> JSON:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": _meta(name, ""),
            "spec": {"controller": "example.com/ingress", "parameters": {
                "apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external",
                "scope": "Namespace", "namespace": "infra"}}}  # fmt: skip


def _controllerrevision(name: str, ns: str) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": _meta(name, ns),
            "data": {"spec": {"template": {"$patch": "replace", "spec": {"containers": [
                {"name": "app", "image": "nginx:1.25"}]}}}},
            "revision": 3}  # fmt: skip


def _replicationcontroller(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": _meta(name, ns),
            "spec": {"replicas": 0, "selector": {"app": "web"}, "template": template()},
            "status": {"replicas": 0}}  # fmt: skip


def _podtemplate(name: str, ns: str) -> JSON:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": _meta(name, ns),
            "template": template()}  # fmt: skip


def _events_event(name: str, ns: str) -> JSON:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": _meta(name, ns),
            "eventTime": "2024-05-01T10:00:00.250000Z",
            "series": {"count": 2, "lastObservedTime": "2024-05-01T10:01:00.000001Z"},
            "reportingController": "example.com/agent", "reportingInstance": "agent-0",
            "action": "Apply", "reason": "Applied",
            "regarding": {"kind": "Deployment", "namespace": ns, "name": "web", "apiVersion": "apps/v1"},
            "note": "applied revision 3", "type": "Normal",
            "deprecatedSource": {}, "deprecatedFirstTimestamp": None,
            "deprecatedLastTimestamp": None}  # fmt: skip


SAMPLES: dict[tuple[str, str], Callable[[str, str], JSON]] = {
    ("v1", "Namespace"): _namespace,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Secret"): _secret,
    ("v1", "Service"): _service,
    ("v1", "ServiceAccount"): _serviceaccount,
    ("v1", "Pod"): _pod,
    ("v1", "Node"): _node,
    ("v1", "Event"): _event,
    ("v1", "Endpoints"): _endpoints,
    ("v1", "PersistentVolumeClaim"): _pvc,
    ("apps/v1", "Deployment"): _deployment,
    ("apps/v1", "StatefulSet"): _statefulset,
    ("apps/v1", "DaemonSet"): _daemonset,
    ("apps/v1", "ReplicaSet"): _replicaset,
    ("batch/v1", "Job"): _job,
    ("batch/v1", "CronJob"): _cronjob,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): _hpa,
    ("certificates.k8s.io/v1", "CertificateSigningRequest"): _csr,
    ("coordination.k8s.io/v1", "Lease"): _lease,
    ("discovery.k8s.io/v1", "EndpointSlice"): _endpointslice,
    ("networking.k8s.io/v1", "Ingress"): _ingress,
    ("networking.k8s.io/v1", "NetworkPolicy"): _networkpolicy,
    ("policy/v1", "PodDisruptionBudget"): _pdb,
    ("rbac.authorization.k8s.io/v1", "Role"): _role,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): _clusterrole,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _rolebinding,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): _clusterrolebinding,
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): _crd,
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): _mutating,
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): _validating,
    ("v1", "PersistentVolume"): _pv,
    ("v1", "ResourceQuota"): _quota,
    ("v1", "LimitRange"): _limitrange,
    ("v1", "ReplicationController"): _replicationcontroller,
    ("v1", "PodTemplate"): _podtemplate,
    ("networking.k8s.io/v1", "IngressClass"): _ingressclass,
    ("apps/v1", "ControllerRevision"): _controllerrevision,
    ("events.k8s.io/v1", "Event"): _events_event,
}


def sample(api_version: str, kind: str, name: str, namespace: str) -> JSON:
    return SAMPLES[(api_version, kind)](name, namespace)
