"""The built-in resource types of kube-apiserver (v1.32) that the emulator serves."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from . import tables
from .errors import field_cause
from .registry import ALL_VERBS, JSON, Cause, FieldExtractor, ResourceType, ScaleSpec
from .selectors import get_path, selector_from_label_selector
from .webhook_config import webhook_configuration_types
from .wire import UserInfo

SchemaFactory = Callable[[str, str, str], Any]

STATUS_VERBS = ("get", "patch", "update")
CREATE_ONLY = ("create",)
NO_COLLECTION_DELETE = ("create", "delete", "get", "list", "patch", "update", "watch")


def _path(dotted: str, default: str = "") -> FieldExtractor:
    def extract(obj: JSON) -> str:
        value = get_path(obj, dotted)
        if value is None:
            return default
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return extract


def _pod_prepare_create(obj: JSON, user: UserInfo | None) -> None:
    obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj)}


def _qos_class(pod: JSON) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    requests = [((c.get("resources") or {}).get("requests") or {}) for c in containers]
    limits = [((c.get("resources") or {}).get("limits") or {}) for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(
        lim.get("cpu")
        and lim.get("memory")
        and req.get("cpu", lim["cpu"]) == lim["cpu"]
        and req.get("memory", lim["memory"]) == lim["memory"]
        for req, lim in zip(requests, limits, strict=True)
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _namespace_prepare_create(obj: JSON, user: UserInfo | None) -> None:
    obj["spec"] = {"finalizers": ["kubernetes"]}
    obj["status"] = {"phase": "Active"}


def _namespace_prepare_update(new: JSON, old: JSON) -> None:
    # spec.finalizers only change through /finalize.
    new["spec"] = old.get("spec", {})


def _namespace_canonicalize(obj: JSON) -> None:
    """The name label is enforced, also on a generated name."""
    labels = obj["metadata"].setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]


def _csr_prepare_create(obj: JSON, user: UserInfo | None) -> None:
    spec = obj.setdefault("spec", {})
    for key in ("username", "uid", "groups", "extra"):
        spec.pop(key, None)
    if user is not None:
        spec["username"] = user.name
        if user.uid:
            spec["uid"] = user.uid
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    obj.pop("status", None)


def _csr_prepare_update(new: JSON, old: JSON) -> None:
    new["spec"] = old.get("spec", {})


_CSR_USAGES = {
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime",
    "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
    "microsoft sgc", "netscape sgc",
}  # fmt: skip


def _csr_validate(new: JSON, old: JSON | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = new.get("spec") or {}
    if not spec.get("request"):
        causes.append(field_cause("FieldValueRequired", "spec.request", "Required value"))
    signer = spec.get("signerName")
    if not signer:
        causes.append(field_cause("FieldValueRequired", "spec.signerName", "Required value"))
    usages = spec.get("usages")
    if not usages:
        causes.append(field_cause("FieldValueRequired", "spec.usages", "Required value"))
    else:
        for i, usage in enumerate(usages):
            if usage not in _CSR_USAGES:
                supported = ", ".join(f'"{u}"' for u in sorted(_CSR_USAGES))
                causes.append(
                    field_cause(
                        "FieldValueNotSupported",
                        f"spec.usages[{i}]",
                        f'Unsupported value: "{usage}": supported values: {supported}',
                    )
                )
    exp = spec.get("expirationSeconds")
    if exp is not None and (not isinstance(exp, int) or exp < 600):
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "spec.expirationSeconds",
                f"Invalid value: {exp}: may not specify a duration less than 600 seconds (10m0s)",
            )
        )
    types = [c.get("type") for c in (new.get("status") or {}).get("conditions") or []]
    if "Approved" in types and "Denied" in types:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "status.conditions",
                'Invalid value: "Approved": Approved and Denied conditions are mutually exclusive',
            )
        )
    return causes


def _selector_immutable(new: JSON, old: JSON | None) -> list[Cause]:
    if old is None:
        return []
    if (new.get("spec") or {}).get("selector") != (old.get("spec") or {}).get("selector"):
        return [
            field_cause(
                "FieldValueInvalid",
                "spec.selector",
                f"Invalid value: {_go_value((new.get('spec') or {}).get('selector'))}: "
                "field is immutable",
            )
        ]
    return []


def _replicas_nonnegative(new: JSON, old: JSON | None) -> list[Cause]:
    """apps validation of spec.replicas (ValidateNonnegativeField), then the selector check."""
    causes = _selector_immutable(new, old)
    replicas = (new.get("spec") or {}).get("replicas")
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas < 0:
        causes.insert(
            0,
            field_cause(
                "FieldValueInvalid",
                "spec.replicas",
                f"Invalid value: {replicas}: must be greater than or equal to 0",
            ),
        )
    return causes


def _go_value(value: Any) -> str:
    return "v1.LabelSelector{...}" if isinstance(value, dict) else repr(value)


# core.MaxSecretSize: what a ConfigMap's data and binaryData, or a Secret's data, may total.
MAX_DATA_BYTES = 1024 * 1024


def _too_long(field: str, limit: int) -> Cause:
    return field_cause("FieldValueTooLong", field, f"Too long: may not be more than {limit} bytes")


def _data_bytes(values: Any, *, encoded: bool) -> int:
    """The bytes of a data map's values (base64-decoded when `encoded`)."""
    total = 0
    for value in (values or {}).values() if isinstance(values, dict) else ():
        if not isinstance(value, str):
            continue
        if encoded:
            total += len(value) * 3 // 4 - value[-2:].count("=")
        else:
            total += len(value.encode())
    return total


def _configmap_validate(new: JSON, old: JSON | None) -> list[Cause]:
    """ValidateConfigMap's size rule (data plus binaryData), then immutability."""
    causes = _immutable_data(new, old)
    size = _data_bytes(new.get("data"), encoded=False)
    size += _data_bytes(new.get("binaryData"), encoded=True)
    if size > MAX_DATA_BYTES:
        causes.insert(0, _too_long("[]", MAX_DATA_BYTES))
    return causes


def _port_causes(spec: JSON) -> list[Cause]:
    """ValidateService's port ranges: port, an integer targetPort, nodePort."""
    causes: list[Cause] = []
    ports = spec.get("ports")
    for i, port in enumerate(ports if isinstance(ports, list) else []):
        if not isinstance(port, dict):
            continue
        for key in ("port", "targetPort", "nodePort"):
            value = port.get(key)
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            if key == "nodePort" and value == 0:
                continue  # unset: allocated by the server
            if not 1 <= value <= 65535:
                causes.append(
                    field_cause(
                        "FieldValueInvalid",
                        f"spec.ports[{i}].{key}",
                        f"Invalid value: {value}: must be between 1 and 65535, inclusive",
                    )
                )
    return causes


def _service_validate(new: JSON, old: JSON | None) -> list[Cause]:
    spec = new.get("spec")
    return _port_causes(spec) if isinstance(spec, dict) else []


def _go_string_map(labels: dict[str, Any]) -> str:
    """Go's %#v of a map[string]string (keys sorted)."""
    inner = ", ".join(f"{json.dumps(k)}:{json.dumps(str(v))}" for k, v in sorted(labels.items()))
    return f"map[string]string{{{inner}}}"


def _template_matches_selector(new: JSON) -> list[Cause]:
    """apps validation: a selector that selects nothing of its own pod template is refused."""
    spec = new.get("spec") or {}
    selector = spec.get("selector")
    template = spec.get("template")
    if not isinstance(selector, dict) or not isinstance(template, dict):
        return []
    labels = (template.get("metadata") or {}).get("labels") or {}
    matcher = selector_from_label_selector(selector)
    if matcher.empty() or matcher.matches(labels):
        return []
    return [
        field_cause(
            "FieldValueInvalid",
            "spec.template.metadata.labels",
            f"Invalid value: {_go_string_map(labels)}: `selector` does not match template `labels`",
        )
    ]


def _workload_validate(new: JSON, old: JSON | None) -> list[Cause]:
    """Deployments, ReplicaSets and StatefulSets: replicas, selector immutability, template."""
    return [*_replicas_nonnegative(new, old), *_template_matches_selector(new)]


def _daemonset_validate(new: JSON, old: JSON | None) -> list[Cause]:
    return [*_selector_immutable(new, old), *_template_matches_selector(new)]


def _immutable_data(new: JSON, old: JSON | None) -> list[Cause]:
    if old is None or not old.get("immutable"):
        return []
    causes: list[Cause] = []
    for key in ("data", "binaryData"):
        if new.get(key) != old.get(key):
            causes.append(
                field_cause(
                    "FieldValueForbidden",
                    key,
                    "Forbidden: field is immutable when `immutable` is set",
                )
            )
    if not new.get("immutable"):
        causes.append(
            field_cause(
                "FieldValueForbidden",
                "immutable",
                "Forbidden: field is immutable when `immutable` is set",
            )
        )
    return causes


def _secret_validate(new: JSON, old: JSON | None) -> list[Cause]:
    causes = _immutable_data(new, old)
    if _data_bytes(new.get("data"), encoded=True) > MAX_DATA_BYTES:
        causes.insert(0, _too_long("data", MAX_DATA_BYTES))
    if old is not None and new.get("type", "Opaque") != old.get("type", "Opaque"):
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "type",
                f'Invalid value: "{new.get("type")}": field is immutable',
            )
        )
    return causes


def _secret_prepare_create(obj: JSON, user: UserInfo | None) -> None:
    obj.setdefault("type", "Opaque")


def _service_prepare_create(obj: JSON, user: UserInfo | None) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName" and "clusterIP" not in spec:
        # Deterministic per name, inside the default service CIDR.
        h = sum(obj["metadata"]["name"].encode()) % 250 + 2
        spec["clusterIP"] = f"10.96.{h // 250}.{h}"
        spec["clusterIPs"] = [spec["clusterIP"]]
    obj["status"] = {"loadBalancer": {}}


_EVENT_SOURCE = _path("source.component")


def _with_columns(rt: ResourceType) -> ResourceType:
    tables.attach_builtin_columns(rt)
    return rt


def builtin_types(schema_for: SchemaFactory | None = None) -> list[ResourceType]:
    """All built-in types. `schema_for(group, version, kind)` supplies SCHEMA's TypeSchema."""

    def t(*args: Any, **kw: Any) -> ResourceType:
        rt = ResourceType(*args, **kw)
        if schema_for is not None and rt.schema is None:
            try:
                rt.schema = schema_for(rt.group, rt.version, rt.kind)
            except (KeyError, LookupError):
                rt.schema = None
        tables.attach_builtin_columns(rt)
        return rt

    status = ("status",)
    scale_status = ("scale", "status")
    spec_scale = ScaleSpec(selector_from_spec=True)
    pod_fields = {
        "spec.nodeName": _path("spec.nodeName"),
        "spec.restartPolicy": _path("spec.restartPolicy"),
        "spec.schedulerName": _path("spec.schedulerName"),
        "spec.serviceAccountName": _path("spec.serviceAccountName"),
        "spec.hostNetwork": _path("spec.hostNetwork", "false"),
        "status.phase": _path("status.phase"),
        "status.podIP": _path("status.podIP"),
        "status.nominatedNodeName": _path("status.nominatedNodeName"),
    }
    event_fields = {
        f"involvedObject.{k}": _path(f"involvedObject.{k}")
        for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    }
    event_fields.update(
        reason=_path("reason"),
        reportingComponent=_path("reportingComponent"),
        source=_EVENT_SOURCE,
        type=_path("type"),
    )
    return [
        # core/v1
        t("", "v1", "namespaces", "Namespace", False, short_names=("ns",),
          verbs=NO_COLLECTION_DELETE, subresources=("finalize", "status"),
          name_validation="label", prepare_create=_namespace_prepare_create,
          prepare_update=_namespace_prepare_update, canonicalize=_namespace_canonicalize,
          return_deleted_object=True,
          field_labels={"status.phase": _path("status.phase")}),
        t("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",),
          validate=_configmap_validate),
        t("", "v1", "secrets", "Secret", True, field_labels={"type": _path("type")},
          prepare_create=_secret_prepare_create, validate=_secret_validate),
        t("", "v1", "services", "Service", True, short_names=("svc",), categories=("all",),
          verbs=NO_COLLECTION_DELETE, subresources=status, allow_create_on_update=True,
          reset_status_on_create=True, name_validation="label1035",
          prepare_create=_service_prepare_create, validate=_service_validate,
          field_labels={"spec.clusterIP": _path("spec.clusterIP"), "spec.type": _path("spec.type")}),
        t("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=("sa",)),
        t("", "v1", "pods", "Pod", True, short_names=("po",), categories=("all",),
          subresources=("status",), reset_status_on_create=True, field_labels=pod_fields,
          prepare_create=_pod_prepare_create, return_deleted_object=True),
        t("", "v1", "nodes", "Node", False, short_names=("no",), subresources=status,
          field_labels={"spec.unschedulable": _path("spec.unschedulable", "false")}),
        t("", "v1", "events", "Event", True, short_names=("ev",), allow_create_on_update=True,
          field_labels=event_fields, name_validation="path"),
        t("", "v1", "endpoints", "Endpoints", True, short_names=("ep",),
          allow_create_on_update=True, singular="endpoints"),
        t("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True,
          short_names=("pvc",), subresources=status, reset_status_on_create=True),
        # apps/v1
        t("apps", "v1", "deployments", "Deployment", True, short_names=("deploy",),
          categories=("all",), subresources=scale_status, scale=spec_scale,
          tracks_generation=True, generation_on_annotations=True, reset_status_on_create=True,
          empty_status={}, validate=_workload_validate),
        t("apps", "v1", "statefulsets", "StatefulSet", True, short_names=("sts",),
          categories=("all",), subresources=scale_status, scale=spec_scale,
          tracks_generation=True, reset_status_on_create=True, validate=_workload_validate,
          empty_status={"replicas": 0, "availableReplicas": 0}),
        t("apps", "v1", "daemonsets", "DaemonSet", True, short_names=("ds",),
          categories=("all",), subresources=status, tracks_generation=True,
          reset_status_on_create=True, validate=_daemonset_validate,
          empty_status={"currentNumberScheduled": 0, "numberMisscheduled": 0,
                        "desiredNumberScheduled": 0, "numberReady": 0}),
        t("apps", "v1", "replicasets", "ReplicaSet", True, short_names=("rs",),
          categories=("all",), subresources=scale_status, scale=spec_scale,
          tracks_generation=True, reset_status_on_create=True, validate=_workload_validate,
          empty_status={"replicas": 0},
          field_labels={"status.replicas": _path("status.replicas", "0")}),
        # batch/v1
        t("batch", "v1", "jobs", "Job", True, categories=("all",), subresources=status,
          tracks_generation=True, reset_status_on_create=True, empty_status={},
          field_labels={"status.successful": _path("status.succeeded", "0")}),
        t("batch", "v1", "cronjobs", "CronJob", True, short_names=("cj",),
          categories=("all",), subresources=status, tracks_generation=True,
          reset_status_on_create=True, empty_status={}),
        # autoscaling/v2
        t("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True,
          short_names=("hpa",), categories=("all",), subresources=status,
          reset_status_on_create=True),
        # certificates.k8s.io/v1
        t("certificates.k8s.io", "v1", "certificatesigningrequests",
          "CertificateSigningRequest", False, short_names=("csr",),
          subresources=("approval", "status"), tracks_generation=False,
          prepare_create=_csr_prepare_create, prepare_update=_csr_prepare_update,
          validate=_csr_validate, field_labels={"spec.signerName": _path("spec.signerName")}),
        # coordination.k8s.io/v1
        t("coordination.k8s.io", "v1", "leases", "Lease", True, allow_create_on_update=True),
        # discovery.k8s.io/v1
        t("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True,
          tracks_generation=True),
        # networking.k8s.io/v1
        t("networking.k8s.io", "v1", "ingresses", "Ingress", True, short_names=("ing",),
          subresources=status, tracks_generation=True, reset_status_on_create=True,
          empty_status={"loadBalancer": {}}),
        t("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True,
          short_names=("netpol",), tracks_generation=True),
        # policy/v1
        t("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
          short_names=("pdb",), subresources=status, tracks_generation=True,
          reset_status_on_create=True,
          empty_status={"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                        "expectedPods": 0}),
        # rbac.authorization.k8s.io/v1
        t("rbac.authorization.k8s.io", "v1", "roles", "Role", True,
          allow_create_on_update=True, name_validation="path"),
        t("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True,
          allow_create_on_update=True, name_validation="path"),
        t("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False,
          allow_create_on_update=True, name_validation="path"),
        t("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
          False, allow_create_on_update=True, name_validation="path"),
        # admissionregistration.k8s.io/v1 (called by admission.py)
        *map(_with_columns, webhook_configuration_types()),
        # apiextensions.k8s.io/v1 (served by crd.py's strategy)
        t("apiextensions.k8s.io", "v1", "customresourcedefinitions",
          "CustomResourceDefinition", False, short_names=("crd", "crds"),
          categories=("api-extensions",), subresources=status, tracks_generation=True,
          allow_unconditional_update=False, reset_status_on_create=True,
          delete_finalizers=("customresourcecleanup.apiextensions.k8s.io",),
          return_deleted_object=True),
        # Reviews: create-only, answered by AUTH's functions.
        t("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False,
          verbs=CREATE_ONLY, name_validation="none"),
        t("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False,
          verbs=CREATE_ONLY, name_validation="none"),
        t("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False,
          verbs=CREATE_ONLY, name_validation="none"),
        t("authorization.k8s.io", "v1", "selfsubjectaccessreviews",
          "SelfSubjectAccessReview", False, verbs=CREATE_ONLY, name_validation="none"),
        t("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview",
          False, verbs=CREATE_ONLY, name_validation="none"),
        t("authorization.k8s.io", "v1", "localsubjectaccessreviews",
          "LocalSubjectAccessReview", True, verbs=CREATE_ONLY, name_validation="none"),
    ]  # fmt: skip


__all__ = ["ALL_VERBS", "STATUS_VERBS", "builtin_types"]
