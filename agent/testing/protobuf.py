"""Request bodies in Kubernetes' protobuf encoding, decoded to the JSON form of the object.

kubectl's typed clients (`create deployment|namespace|configmap|secret|serviceaccount|
service|job|cronjob|poddisruptionbudget|ingress|role|rolebinding|token`, `auth can-i`,
`auth whoami`) send `application/vnd.kubernetes.protobuf`: the magic prefix
`k8s\\x00`, then a runtime.Unknown message {typeMeta{apiVersion, kind}, raw, contentEncoding,
contentType} whose `raw` is the object's own message. kube-apiserver decodes that into the Go
type; the emulator keeps plain dicts, so it decodes into the dict that Go's encoding/json
would make of that struct: fields in struct order, zero values dropped where the JSON tag
says omitempty, value structs always present, a zero metav1.Time as null.

The wire decoder is generic; what each message means comes from the field tables below,
written from the field numbers in k8s.io/api and k8s.io/apimachinery generated.proto. Kinds
without a table, and fields a table does not list, are refused with 415 rather than guessed.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import ApiError

JSON = dict[str, Any]
PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
# What kube-apiserver lists in its 415 for the object endpoints of built-in and custom types.
BUILTIN_MEDIA_TYPES = ("application/json", "application/yaml", PROTOBUF)
CUSTOM_MEDIA_TYPES = ("application/json", "application/yaml")

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class ProtobufError(ValueError):
    """The bytes are not a well-formed protobuf message."""


class UnsupportedError(ValueError):
    """Well-formed, but a kind or field this emulator has no table for."""


@dataclass(frozen=True)
class Field:
    number: int
    name: str
    # "string", "bool", "int32", "int64", "bytes", "time", "quantity", "intorstr",
    # "msg:<Message>", "map:<value type>" (string keys), "extra" (map of ExtraValue).
    type: str
    repeated: bool = False
    # Go pointer (or optional) field: present in JSON exactly when present on the wire.
    pointer: bool = False
    # JSON tag without omitempty: the zero value is written out (a nil pointer as null).
    keep_zero: bool = False
    # An embedded Go struct (`json:",inline"`): its fields are merged into the parent's.
    inline: bool = False


def _f(number: int, name: str, type_: str = "string", flags: str = "") -> Field:
    """flags: r(epeated), p(ointer), k(eep zero: no omitempty), i(nline)."""
    return Field(number, name, type_, "r" in flags, "p" in flags, "k" in flags, "i" in flags)


_META = "msg:ObjectMeta"

# Field order = Go struct order (go-to-protobuf writes .proto fields in struct order).
MESSAGES: dict[str, tuple[Field, ...]] = {
    # --- k8s.io/apimachinery/pkg/apis/meta/v1 ---
    "ObjectMeta": (
        _f(1, "name"),
        _f(2, "generateName"),
        _f(3, "namespace"),
        _f(4, "selfLink"),
        _f(5, "uid"),
        _f(6, "resourceVersion"),
        _f(7, "generation", "int64"),
        _f(8, "creationTimestamp", "time"),
        _f(9, "deletionTimestamp", "time", "p"),
        _f(10, "deletionGracePeriodSeconds", "int64", "p"),
        _f(11, "labels", "map:string"),
        _f(12, "annotations", "map:string"),
        _f(13, "ownerReferences", "msg:OwnerReference", "r"),
        _f(14, "finalizers", "string", "r"),
    ),
    "OwnerReference": (
        _f(5, "apiVersion", "string", "k"),
        _f(1, "kind", "string", "k"),
        _f(3, "name", "string", "k"),
        _f(4, "uid", "string", "k"),
        _f(6, "controller", "bool", "p"),
        _f(7, "blockOwnerDeletion", "bool", "p"),
    ),
    "LabelSelector": (
        _f(1, "matchLabels", "map:string"),
        _f(2, "matchExpressions", "msg:LabelSelectorRequirement", "r"),
    ),
    "LabelSelectorRequirement": (
        _f(1, "key", "string", "k"),
        _f(2, "operator", "string", "k"),
        _f(3, "values", "string", "r"),
    ),
    # --- k8s.io/api/core/v1 ---
    "Namespace": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:NamespaceSpec"),
        _f(3, "status", "msg:NamespaceStatus"),
    ),
    "NamespaceSpec": (_f(1, "finalizers", "string", "r"),),
    "NamespaceStatus": (_f(1, "phase"),),
    "ConfigMap": (
        _f(1, "metadata", _META),
        _f(4, "immutable", "bool", "p"),
        _f(2, "data", "map:string"),
        _f(3, "binaryData", "map:bytes"),
    ),
    "Secret": (
        _f(1, "metadata", _META),
        _f(5, "immutable", "bool", "p"),
        _f(2, "data", "map:bytes"),
        _f(4, "stringData", "map:string"),
        _f(3, "type"),
    ),
    "ServiceAccount": (
        _f(1, "metadata", _META),
        _f(2, "secrets", "msg:ObjectReference", "r"),
        _f(3, "imagePullSecrets", "msg:LocalObjectReference", "r"),
        _f(4, "automountServiceAccountToken", "bool", "p"),
    ),
    "ObjectReference": (
        _f(1, "kind"),
        _f(2, "namespace"),
        _f(3, "name"),
        _f(4, "uid"),
        _f(5, "apiVersion"),
        _f(6, "resourceVersion"),
        _f(7, "fieldPath"),
    ),
    "LocalObjectReference": (_f(1, "name"),),
    "PodTemplateSpec": (_f(1, "metadata", _META), _f(2, "spec", "msg:PodSpec")),
    "PodSpec": (
        _f(20, "initContainers", "msg:Container", "r"),
        _f(2, "containers", "msg:Container", "rk"),
        _f(3, "restartPolicy"),
        _f(4, "terminationGracePeriodSeconds", "int64", "p"),
        _f(5, "activeDeadlineSeconds", "int64", "p"),
        _f(6, "dnsPolicy"),
        _f(7, "nodeSelector", "map:string"),
        _f(8, "serviceAccountName"),
        _f(9, "serviceAccount"),
        _f(21, "automountServiceAccountToken", "bool", "p"),
        _f(10, "nodeName"),
        _f(11, "hostNetwork", "bool"),
        _f(12, "hostPID", "bool"),
        _f(13, "hostIPC", "bool"),
        _f(27, "shareProcessNamespace", "bool", "p"),
        _f(14, "securityContext", "msg:PodSecurityContext", "p"),
        _f(15, "imagePullSecrets", "msg:LocalObjectReference", "r"),
        _f(16, "hostname"),
        _f(17, "subdomain"),
        _f(19, "schedulerName"),
        _f(24, "priorityClassName"),
        _f(25, "priority", "int32", "p"),
        _f(29, "runtimeClassName", "string", "p"),
        _f(30, "enableServiceLinks", "bool", "p"),
        _f(31, "preemptionPolicy", "string", "p"),
        _f(35, "setHostnameAsFQDN", "bool", "p"),
        _f(37, "hostUsers", "bool", "p"),
    ),
    "Container": (
        _f(1, "name", "string", "k"),
        _f(2, "image"),
        _f(3, "command", "string", "r"),
        _f(4, "args", "string", "r"),
        _f(5, "workingDir"),
        _f(6, "ports", "msg:ContainerPort", "r"),
        _f(7, "env", "msg:EnvVar", "r"),
        _f(8, "resources", "msg:ResourceRequirements"),
        _f(24, "restartPolicy", "string", "p"),
        _f(9, "volumeMounts", "msg:VolumeMount", "r"),
        _f(13, "terminationMessagePath"),
        _f(20, "terminationMessagePolicy"),
        _f(14, "imagePullPolicy"),
        _f(16, "stdin", "bool"),
        _f(17, "stdinOnce", "bool"),
        _f(18, "tty", "bool"),
    ),
    "ContainerPort": (
        _f(1, "name"),
        _f(2, "hostPort", "int32"),
        _f(3, "containerPort", "int32", "k"),
        _f(4, "protocol"),
        _f(5, "hostIP"),
    ),
    "EnvVar": (_f(1, "name", "string", "k"), _f(2, "value")),
    "VolumeMount": (
        _f(1, "name", "string", "k"),
        _f(2, "readOnly", "bool"),
        _f(7, "recursiveReadOnly", "string", "p"),
        _f(3, "mountPath", "string", "k"),
        _f(4, "subPath"),
        _f(5, "mountPropagation", "string", "p"),
        _f(6, "subPathExpr"),
    ),
    "ResourceRequirements": (_f(1, "limits", "map:quantity"), _f(2, "requests", "map:quantity")),
    # A Service's spec and status (core/v1).
    "Service": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:ServiceSpec"),
        _f(3, "status", "msg:ServiceStatus"),
    ),
    "ServiceSpec": (
        _f(1, "ports", "msg:ServicePort", "r"),
        _f(2, "selector", "map:string"),
        _f(3, "clusterIP"),
        _f(18, "clusterIPs", "string", "r"),
        _f(4, "type"),
        _f(5, "externalIPs", "string", "r"),
        _f(7, "sessionAffinity"),
        _f(8, "loadBalancerIP"),
        _f(9, "loadBalancerSourceRanges", "string", "r"),
        _f(10, "externalName"),
        _f(11, "externalTrafficPolicy"),
        _f(12, "healthCheckNodePort", "int32"),
        _f(13, "publishNotReadyAddresses", "bool"),
        _f(14, "sessionAffinityConfig", "msg:SessionAffinityConfig", "p"),
        _f(19, "ipFamilies", "string", "r"),
        _f(17, "ipFamilyPolicy", "string", "p"),
        _f(20, "allocateLoadBalancerNodePorts", "bool", "p"),
        _f(21, "loadBalancerClass", "string", "p"),
        _f(22, "internalTrafficPolicy", "string", "p"),
        _f(23, "trafficDistribution", "string", "p"),
    ),
    "ServicePort": (
        _f(1, "name"),
        _f(2, "protocol"),
        _f(6, "appProtocol", "string", "p"),
        _f(3, "port", "int32", "k"),
        # A value IntOrString: encoding/json's omitempty never drops a struct.
        _f(4, "targetPort", "intorstr", "k"),
        _f(5, "nodePort", "int32"),
    ),
    "ServiceStatus": (
        _f(1, "loadBalancer", "msg:LoadBalancerStatus"),
        _f(2, "conditions", "msg:Condition", "r"),
    ),
    "LoadBalancerStatus": (_f(1, "ingress", "msg:LoadBalancerIngress", "r"),),
    "LoadBalancerIngress": (
        _f(1, "ip"),
        _f(2, "hostname"),
        _f(3, "ipMode", "string", "p"),
        _f(4, "ports", "msg:PortStatus", "r"),
    ),
    "TypedLocalObjectReference": (
        _f(1, "apiGroup", "string", "p"),
        _f(2, "kind", "string", "k"),
        _f(3, "name", "string", "k"),
    ),
    "PodSecurityContext": (
        _f(1, "seLinuxOptions", "msg:SELinuxOptions", "p"),
        _f(8, "windowsOptions", "msg:WindowsSecurityContextOptions", "p"),
        _f(2, "runAsUser", "int64", "p"),
        _f(6, "runAsGroup", "int64", "p"),
        _f(3, "runAsNonRoot", "bool", "p"),
        _f(4, "supplementalGroups", "int64", "r"),
        _f(12, "supplementalGroupsPolicy", "string", "p"),
        _f(5, "fsGroup", "int64", "p"),
        _f(7, "sysctls", "msg:Sysctl", "r"),
        _f(9, "fsGroupChangePolicy", "string", "p"),
        _f(10, "seccompProfile", "msg:SeccompProfile", "p"),
        _f(11, "appArmorProfile", "msg:AppArmorProfile", "p"),
        _f(13, "seLinuxChangePolicy", "string", "p"),
    ),
    "Sysctl": (_f(1, "name", "string", "k"), _f(2, "value", "string", "k")),
    "AppArmorProfile": (_f(1, "type", "string", "k"), _f(2, "localhostProfile", "string", "p")),
    # --- k8s.io/api/apps/v1 ---
    "Deployment": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:DeploymentSpec"),
        _f(3, "status", "msg:DeploymentStatus"),
    ),
    "DeploymentSpec": (
        _f(1, "replicas", "int32", "p"),
        _f(2, "selector", "msg:LabelSelector", "p"),
        _f(3, "template", "msg:PodTemplateSpec"),
        _f(4, "strategy", "msg:DeploymentStrategy"),
        _f(5, "minReadySeconds", "int32"),
        _f(6, "revisionHistoryLimit", "int32", "p"),
        _f(7, "paused", "bool"),
        _f(9, "progressDeadlineSeconds", "int32", "p"),
    ),
    "DeploymentStrategy": (
        _f(1, "type"),
        _f(2, "rollingUpdate", "msg:RollingUpdateDeployment", "p"),
    ),
    "RollingUpdateDeployment": (
        _f(1, "maxUnavailable", "intorstr", "p"),
        _f(2, "maxSurge", "intorstr", "p"),
    ),
    "DeploymentStatus": (
        _f(1, "observedGeneration", "int64"),
        _f(2, "replicas", "int32"),
        _f(3, "updatedReplicas", "int32"),
        _f(7, "readyReplicas", "int32"),
        _f(4, "availableReplicas", "int32"),
        _f(5, "unavailableReplicas", "int32"),
        _f(9, "terminatingReplicas", "int32", "p"),
        _f(6, "conditions", "msg:DeploymentCondition", "r"),
        _f(8, "collisionCount", "int32", "p"),
    ),
    "DeploymentCondition": (
        _f(1, "type", "string", "k"),
        _f(2, "status", "string", "k"),
        _f(6, "lastUpdateTime", "time"),
        _f(7, "lastTransitionTime", "time"),
        _f(4, "reason"),
        _f(5, "message"),
    ),
    # --- k8s.io/api/batch/v1 ---
    "Job": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:JobSpec"),
        _f(3, "status", "msg:JobStatus"),
    ),
    "JobSpec": (
        _f(1, "parallelism", "int32", "p"),
        _f(2, "completions", "int32", "p"),
        _f(3, "activeDeadlineSeconds", "int64", "p"),
        _f(11, "podFailurePolicy", "msg:PodFailurePolicy", "p"),
        _f(16, "successPolicy", "msg:SuccessPolicy", "p"),
        _f(7, "backoffLimit", "int32", "p"),
        _f(12, "backoffLimitPerIndex", "int32", "p"),
        _f(13, "maxFailedIndexes", "int32", "p"),
        _f(4, "selector", "msg:LabelSelector", "p"),
        _f(5, "manualSelector", "bool", "p"),
        _f(6, "template", "msg:PodTemplateSpec"),
        _f(8, "ttlSecondsAfterFinished", "int32", "p"),
        _f(9, "completionMode", "string", "p"),
        _f(10, "suspend", "bool", "p"),
        _f(14, "podReplacementPolicy", "string", "p"),
        _f(15, "managedBy", "string", "p"),
    ),
    "JobStatus": (
        _f(1, "conditions", "msg:JobCondition", "r"),
        _f(2, "startTime", "time", "p"),
        _f(3, "completionTime", "time", "p"),
        _f(4, "active", "int32"),
        _f(5, "succeeded", "int32"),
        _f(6, "failed", "int32"),
        _f(11, "terminating", "int32", "p"),
        _f(7, "completedIndexes"),
        _f(10, "failedIndexes", "string", "p"),
        _f(8, "uncountedTerminatedPods", "msg:UncountedTerminatedPods", "p"),
        _f(9, "ready", "int32", "p"),
    ),
    "JobCondition": (
        _f(1, "type", "string", "k"),
        _f(2, "status", "string", "k"),
        _f(3, "lastProbeTime", "time"),
        _f(4, "lastTransitionTime", "time"),
        _f(5, "reason"),
        _f(6, "message"),
    ),
    "UncountedTerminatedPods": (_f(1, "succeeded", "string", "r"), _f(2, "failed", "string", "r")),
    "JobTemplateSpec": (_f(1, "metadata", _META), _f(2, "spec", "msg:JobSpec")),
    "CronJob": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:CronJobSpec"),
        _f(3, "status", "msg:CronJobStatus"),
    ),
    "CronJobSpec": (
        _f(1, "schedule", "string", "k"),
        _f(8, "timeZone", "string", "p"),
        _f(2, "startingDeadlineSeconds", "int64", "p"),
        _f(3, "concurrencyPolicy"),
        _f(4, "suspend", "bool", "p"),
        _f(5, "jobTemplate", "msg:JobTemplateSpec"),
        _f(6, "successfulJobsHistoryLimit", "int32", "p"),
        _f(7, "failedJobsHistoryLimit", "int32", "p"),
    ),
    "CronJobStatus": (
        _f(1, "active", "msg:ObjectReference", "r"),
        _f(4, "lastScheduleTime", "time", "p"),
        _f(5, "lastSuccessfulTime", "time", "p"),
    ),
    # --- k8s.io/api/policy/v1 ---
    "PodDisruptionBudget": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:PodDisruptionBudgetSpec"),
        _f(3, "status", "msg:PodDisruptionBudgetStatus"),
    ),
    "PodDisruptionBudgetSpec": (
        _f(1, "minAvailable", "intorstr", "p"),
        _f(2, "selector", "msg:LabelSelector", "p"),
        _f(3, "maxUnavailable", "intorstr", "p"),
    ),
    "PodDisruptionBudgetStatus": (
        _f(1, "observedGeneration", "int64"),
        _f(2, "disruptedPods", "map:time"),
        _f(3, "disruptionsAllowed", "int32", "k"),
        _f(4, "currentHealthy", "int32", "k"),
        _f(5, "desiredHealthy", "int32", "k"),
        _f(6, "expectedPods", "int32", "k"),
        _f(7, "conditions", "msg:Condition", "r"),
    ),
    # --- k8s.io/api/networking/v1 ---
    "Ingress": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:IngressSpec"),
        _f(3, "status", "msg:IngressStatus"),
    ),
    "IngressSpec": (
        _f(4, "ingressClassName", "string", "p"),
        _f(1, "defaultBackend", "msg:IngressBackend", "p"),
        _f(2, "tls", "msg:IngressTLS", "r"),
        _f(3, "rules", "msg:IngressRule", "r"),
    ),
    "IngressBackend": (
        _f(4, "service", "msg:IngressServiceBackend", "p"),
        _f(3, "resource", "msg:TypedLocalObjectReference", "p"),
    ),
    "IngressServiceBackend": (
        _f(1, "name", "string", "k"),
        _f(2, "port", "msg:ServiceBackendPort"),
    ),
    "ServiceBackendPort": (_f(1, "name"), _f(2, "number", "int32")),
    "IngressTLS": (_f(1, "hosts", "string", "r"), _f(2, "secretName")),
    # IngressRuleValue is embedded in IngressRule: its fields sit in the rule's JSON.
    "IngressRule": (_f(1, "host"), _f(2, "ingressRuleValue", "msg:IngressRuleValue", "i")),
    "IngressRuleValue": (_f(1, "http", "msg:HTTPIngressRuleValue", "p"),),
    "HTTPIngressRuleValue": (_f(1, "paths", "msg:HTTPIngressPath", "rk"),),
    "HTTPIngressPath": (
        _f(1, "path"),
        _f(3, "pathType", "string", "p"),
        _f(2, "backend", "msg:IngressBackend"),
    ),
    "IngressStatus": (_f(1, "loadBalancer", "msg:IngressLoadBalancerStatus"),),
    "IngressLoadBalancerStatus": (_f(1, "ingress", "msg:IngressLoadBalancerIngress", "r"),),
    "IngressLoadBalancerIngress": (
        _f(1, "ip"),
        _f(2, "hostname"),
        _f(4, "ports", "msg:IngressPortStatus", "r"),
    ),
    "IngressPortStatus": (
        _f(1, "port", "int32", "k"),
        _f(2, "protocol", "string", "k"),
        _f(3, "error", "string", "p"),
    ),
    # --- k8s.io/api/rbac/v1 ---
    "Role": (_f(1, "metadata", _META), _f(2, "rules", "msg:PolicyRule", "rk")),
    "ClusterRole": (_f(1, "metadata", _META), _f(2, "rules", "msg:PolicyRule", "rk")),
    "PolicyRule": (
        _f(1, "verbs", "string", "rk"),
        _f(2, "apiGroups", "string", "r"),
        _f(3, "resources", "string", "r"),
        _f(4, "resourceNames", "string", "r"),
        _f(5, "nonResourceURLs", "string", "r"),
    ),
    "RoleBinding": (
        _f(1, "metadata", _META),
        _f(2, "subjects", "msg:Subject", "r"),
        _f(3, "roleRef", "msg:RoleRef"),
    ),
    "Subject": (
        _f(1, "kind", "string", "k"),
        _f(2, "apiGroup"),
        _f(3, "name", "string", "k"),
        _f(4, "namespace"),
    ),
    "RoleRef": (
        _f(1, "apiGroup", "string", "k"),
        _f(2, "kind", "string", "k"),
        _f(3, "name", "string", "k"),
    ),
    # --- k8s.io/api/authorization/v1 ---
    "SelfSubjectAccessReview": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:SelfSubjectAccessReviewSpec"),
        _f(3, "status", "msg:SubjectAccessReviewStatus"),
    ),
    "SelfSubjectAccessReviewSpec": (
        _f(1, "resourceAttributes", "msg:ResourceAttributes", "p"),
        _f(2, "nonResourceAttributes", "msg:NonResourceAttributes", "p"),
    ),
    "SubjectAccessReview": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:SubjectAccessReviewSpec"),
        _f(3, "status", "msg:SubjectAccessReviewStatus"),
    ),
    "SubjectAccessReviewSpec": (
        _f(1, "resourceAttributes", "msg:ResourceAttributes", "p"),
        _f(2, "nonResourceAttributes", "msg:NonResourceAttributes", "p"),
        _f(3, "user"),
        _f(4, "groups", "string", "r"),
        _f(5, "extra", "extra"),
        _f(6, "uid"),
    ),
    "ResourceAttributes": (
        _f(1, "namespace"),
        _f(2, "verb"),
        _f(3, "group"),
        _f(4, "version"),
        _f(5, "resource"),
        _f(6, "subresource"),
        _f(7, "name"),
        _f(8, "fieldSelector", "msg:FieldSelectorAttributes", "p"),
        _f(9, "labelSelector", "msg:LabelSelectorAttributes", "p"),
    ),
    "FieldSelectorAttributes": (
        _f(1, "rawSelector"),
        _f(2, "requirements", "msg:FieldSelectorRequirement", "r"),
    ),
    "FieldSelectorRequirement": (
        _f(1, "key", "string", "k"),
        _f(2, "operator", "string", "k"),
        _f(3, "values", "string", "r"),
    ),
    "LabelSelectorAttributes": (
        _f(1, "rawSelector"),
        _f(2, "requirements", "msg:LabelSelectorRequirement", "r"),
    ),
    "NonResourceAttributes": (_f(1, "path"), _f(2, "verb")),
    "SubjectAccessReviewStatus": (
        _f(1, "allowed", "bool", "k"),
        _f(4, "denied", "bool"),
        _f(2, "reason"),
        _f(3, "evaluationError"),
    ),
    "SelfSubjectRulesReview": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:SelfSubjectRulesReviewSpec"),
        _f(3, "status", "msg:SubjectRulesReviewStatus"),
    ),
    "SelfSubjectRulesReviewSpec": (_f(1, "namespace"),),
    "SubjectRulesReviewStatus": (
        _f(1, "resourceRules", "msg:ResourceRule", "rk"),
        _f(2, "nonResourceRules", "msg:NonResourceRule", "rk"),
        _f(3, "incomplete", "bool", "k"),
        _f(4, "evaluationError"),
    ),
    "ResourceRule": (
        _f(1, "verbs", "string", "rk"),
        _f(2, "apiGroups", "string", "r"),
        _f(3, "resources", "string", "r"),
        _f(4, "resourceNames", "string", "r"),
    ),
    "NonResourceRule": (_f(1, "verbs", "string", "rk"), _f(2, "nonResourceURLs", "string", "r")),
    # --- k8s.io/api/authentication/v1 ---
    "TokenReview": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:TokenReviewSpec"),
        _f(3, "status", "msg:TokenReviewStatus"),
    ),
    "TokenReviewSpec": (_f(1, "token"), _f(2, "audiences", "string", "r")),
    "TokenReviewStatus": (
        _f(1, "authenticated", "bool"),
        _f(2, "user", "msg:UserInfo"),
        _f(4, "audiences", "string", "r"),
        _f(3, "error"),
    ),
    "UserInfo": (
        _f(1, "username"),
        _f(2, "uid"),
        _f(3, "groups", "string", "r"),
        _f(4, "extra", "extra"),
    ),
    "TokenRequest": (
        _f(1, "metadata", _META),
        _f(2, "spec", "msg:TokenRequestSpec"),
        _f(3, "status", "msg:TokenRequestStatus"),
    ),
    "TokenRequestSpec": (
        _f(1, "audiences", "string", "rk"),
        _f(4, "expirationSeconds", "int64", "p"),
        _f(3, "boundObjectRef", "msg:BoundObjectReference", "pk"),
    ),
    "BoundObjectReference": (
        _f(1, "kind"),
        _f(2, "apiVersion"),
        _f(3, "name"),
        _f(4, "uid"),
    ),
    "TokenRequestStatus": (_f(1, "token", "string", "k"), _f(2, "expirationTimestamp", "time")),
    "SelfSubjectReview": (_f(1, "metadata", _META), _f(2, "status", "msg:SelfSubjectReviewStatus")),
    "SelfSubjectReviewStatus": (_f(1, "userInfo", "msg:UserInfo"),),
}
MESSAGES["LocalSubjectAccessReview"] = MESSAGES["SubjectAccessReview"]
MESSAGES["ClusterRoleBinding"] = MESSAGES["RoleBinding"]

# (apiVersion, kind) -> top-level message.
KINDS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("apps/v1", "Deployment"): "Deployment",
    ("v1", "Service"): "Service",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("networking.k8s.io/v1", "Ingress"): "Ingress",
    **{
        ("rbac.authorization.k8s.io/v1", kind): kind
        for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
    },
    **{
        ("authorization.k8s.io/v1", kind): kind
        for kind in (
            "SelfSubjectAccessReview",
            "SelfSubjectRulesReview",
            "SubjectAccessReview",
            "LocalSubjectAccessReview",
        )
    },
    ("authentication.k8s.io/v1", "TokenReview"): "TokenReview",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "SelfSubjectReview",
}

_FIELDS_BY_NUMBER = {name: {f.number: f for f in fields} for name, fields in MESSAGES.items()}

# ------------------------------------------------------------------ wire format


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def iter_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value): an int for varint/fixed, bytes for length-delimited."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0")
        value: int | bytes
        if wire == _VARINT:
            value, pos = _varint(data, pos)
        elif wire == _LEN:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ProtobufError("truncated length-delimited field")
            value, pos = data[pos : pos + size], pos + size
        elif wire == _I64:
            if pos + 8 > len(data):
                raise ProtobufError("truncated fixed64")
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == _I32:
            if pos + 4 > len(data):
                raise ProtobufError("truncated fixed32")
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        yield number, wire, value


def _signed(value: int, bits: int) -> int:
    value &= (1 << 64) - 1  # negative int32 travel as 10-byte varints
    if value >= 1 << 63:
        value -= 1 << 64
    if bits == 32:
        value = (value + (1 << 31)) % (1 << 32) - (1 << 31)
    return value


def _want(wire: int, expected: int, where: str) -> None:
    if wire != expected:
        raise ProtobufError(f"{where}: wire type {wire}, expected {expected}")


def _utf8(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtobufError(f"{where}: invalid UTF-8") from exc


# ------------------------------------------------------------------ well-known kinds


def _time(raw: bytes) -> str | None:
    seconds = nanos = 0
    for number, wire, value in iter_fields(raw):
        if number == 1 and wire == _VARINT:
            assert isinstance(value, int)
            seconds = _signed(value, 64)
        elif number == 2 and wire == _VARINT:
            assert isinstance(value, int)
            nanos = _signed(value, 32)
    if seconds == 0 and nanos == 0:
        return None  # the zero metav1.Time marshals to null
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")  # metav1.Time keeps whole seconds in JSON


def _quantity(raw: bytes) -> str:
    text = ""
    for number, wire, value in iter_fields(raw):
        if number == 1 and wire == _LEN:
            assert isinstance(value, bytes)
            text = _utf8(value, "Quantity.string")
    return text


def _int_or_string(raw: bytes) -> int | str:
    kind, int_val, str_val = 0, 0, ""
    for number, wire, value in iter_fields(raw):
        if number == 1 and wire == _VARINT:
            assert isinstance(value, int)
            kind = _signed(value, 64)
        elif number == 2 and wire == _VARINT:
            assert isinstance(value, int)
            int_val = _signed(value, 32)
        elif number == 3 and wire == _LEN:
            assert isinstance(value, bytes)
            str_val = _utf8(value, "IntOrString.strVal")
    return str_val if kind == 1 else int_val


def _map_entry(raw: bytes, value_type: str, where: str) -> tuple[str, Any]:
    key = ""
    val: Any = _zero(value_type)
    for number, wire, value in iter_fields(raw):
        if number == 1:
            _want(wire, _LEN, where)
            assert isinstance(value, bytes)
            key = _utf8(value, where)
        elif number == 2:
            val = _scalar_or_message(value_type, wire, value, where)
    return key, val


def _zero(type_: str) -> Any:
    if type_ == "string":
        return ""
    if type_ == "bool":
        return False
    if type_ in ("int32", "int64"):
        return 0
    if type_ == "bytes":
        return ""
    if type_ == "quantity":
        return "0"
    if type_ == "intorstr":
        return 0
    if type_ == "extra":
        return []
    if type_.startswith("msg:"):
        return decode_message(type_[4:], b"")
    return None


def _scalar_or_message(type_: str, wire: int, value: int | bytes, where: str) -> Any:
    if type_ in ("int32", "int64", "bool"):
        _want(wire, _VARINT, where)
        assert isinstance(value, int)
        if type_ == "bool":
            return value != 0
        return _signed(value, 32 if type_ == "int32" else 64)
    _want(wire, _LEN, where)
    assert isinstance(value, bytes)
    if type_ == "string":
        return _utf8(value, where)
    if type_ == "bytes":
        return base64.b64encode(value).decode("ascii")
    if type_ == "time":
        return _time(value)
    if type_ == "quantity":
        return _quantity(value)
    if type_ == "intorstr":
        return _int_or_string(value)
    if type_ == "extra":  # ExtraValue: repeated string items = 1
        return [
            _utf8(v, where) for n, _, v in iter_fields(value) if n == 1 and isinstance(v, bytes)
        ]
    if type_.startswith("msg:"):
        return decode_message(type_[4:], value)
    raise UnsupportedError(f"{where}: field type {type_}")


def _is_zero(value: Any) -> bool:
    return value is None or value in ("", 0, False) or value == [] or value == {}


def decode_message(message: str, data: bytes) -> JSON:
    """Decode one message by its table into Go's JSON form of the struct."""
    fields = MESSAGES.get(message)
    if fields is None:
        raise UnsupportedError(f"message {message}")
    by_number = _FIELDS_BY_NUMBER[message]
    seen: dict[str, Any] = {}
    for number, wire, value in iter_fields(data):
        spec = by_number.get(number)
        if spec is None:
            raise UnsupportedError(f"field {number} of {message}")
        where = f"{message}.{spec.name}"
        if spec.type.startswith("map:") or spec.type == "extra":
            _want(wire, _LEN, where)
            assert isinstance(value, bytes)
            value_type = "extra" if spec.type == "extra" else spec.type[4:]
            key, val = _map_entry(value, value_type, where)
            seen.setdefault(spec.name, {})[key] = val
        elif spec.repeated:
            items = seen.setdefault(spec.name, [])
            if wire == _LEN and spec.type in ("int32", "int64", "bool"):
                assert isinstance(value, bytes)
                pos = 0
                while pos < len(value):  # packed scalars
                    item, pos = _varint(value, pos)
                    items.append(_scalar_or_message(spec.type, _VARINT, item, where))
            else:
                items.append(_scalar_or_message(spec.type, wire, value, where))
        else:
            seen[spec.name] = _scalar_or_message(spec.type, wire, value, where)
    out: JSON = {}
    for spec in fields:
        if spec.inline:
            embedded = seen.get(spec.name)
            out.update(embedded if embedded is not None else _zero(spec.type))
        elif spec.name in seen:
            value = seen[spec.name]
            if (
                spec.pointer
                or spec.keep_zero
                or (spec.type.startswith("msg:") and not spec.repeated)
            ):
                out[spec.name] = value
            elif spec.type == "time" and not spec.repeated:
                out[spec.name] = value  # a value metav1.Time: null when zero
            elif not _is_zero(value):
                out[spec.name] = value
        elif spec.pointer:
            if spec.keep_zero:
                out[spec.name] = None  # a nil pointer without omitempty
        elif spec.repeated or spec.type.startswith("map:") or spec.type == "extra":
            if spec.keep_zero:
                out[spec.name] = None  # a nil slice or map without omitempty
        elif spec.type.startswith("msg:") or spec.type == "time":
            out[spec.name] = _zero(spec.type)  # value structs are always written
        elif spec.keep_zero:
            out[spec.name] = _zero(spec.type)
    return out


# ------------------------------------------------------------------ the envelope


@dataclass(frozen=True)
class Envelope:
    api_version: str
    kind: str
    raw: bytes
    content_encoding: str
    content_type: str


def unwrap(body: bytes) -> Envelope:
    """Split `k8s\\x00` + runtime.Unknown into its parts."""
    if not body.startswith(MAGIC):
        raise ProtobufError(
            "provided data does not appear to be a protobuf message, expected prefix "
            + json.dumps(list(MAGIC)).replace(",", "")
        )
    api_version = kind = encoding = content_type = ""
    raw = b""
    for number, wire, value in iter_fields(body[len(MAGIC) :]):
        if wire != _LEN or not isinstance(value, bytes):
            raise ProtobufError(f"runtime.Unknown field {number}: wire type {wire}")
        if number == 1:  # typeMeta {apiVersion = 1, kind = 2}
            for sub, sub_wire, sub_value in iter_fields(value):
                if sub_wire == _LEN and isinstance(sub_value, bytes):
                    if sub == 1:
                        api_version = _utf8(sub_value, "TypeMeta.apiVersion")
                    elif sub == 2:
                        kind = _utf8(sub_value, "TypeMeta.kind")
        elif number == 2:
            raw = value
        elif number == 3:
            encoding = _utf8(value, "Unknown.contentEncoding")
        elif number == 4:
            content_type = _utf8(value, "Unknown.contentType")
    return Envelope(api_version, kind, raw, encoding, content_type)


def unsupported_media_type(accepted: tuple[str, ...], detail: str = "") -> ApiError:
    message = (
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted)
    )
    if detail:
        message += f" ({detail})"
    return ApiError(415, "UnsupportedMediaType", message)


def decode_object(body: bytes, expected_kind: str = "") -> JSON:
    """A protobuf request body -> the object's JSON dict (with apiVersion and kind).

    Raises ApiError: 400 for malformed bytes (as kube-apiserver's decoder does), 415 for a
    kind or field the emulator has no table for.
    """
    target = expected_kind or "the expected kind"
    try:
        envelope = unwrap(body)
        if envelope.content_encoding:
            raise UnsupportedError(f"content encoding {envelope.content_encoding!r}")
        message = KINDS.get((envelope.api_version, envelope.kind))
        if message is None:
            raise UnsupportedError(
                f"no protobuf table for {envelope.api_version}, Kind={envelope.kind}"
            )
        decoded = decode_message(message, envelope.raw)
    except UnsupportedError as exc:
        raise unsupported_media_type(
            ("application/json", "application/yaml"),
            f"the emulator does not decode protobuf for this request: {exc}",
        ) from exc
    except ProtobufError as exc:
        raise ApiError(
            400,
            "BadRequest",
            f"the object provided is unrecognized (must be of type {target}): {exc}",
        ) from exc
    return {"kind": envelope.kind, "apiVersion": envelope.api_version, **decoded}
