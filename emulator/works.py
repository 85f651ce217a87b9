"""Work objects shaped as the Karmada control plane writes them.

karmada-controller-manager's binding controller creates one Work per member cluster
and resource template, in `karmada-es-<cluster>`, with the execution-controller
finalizer, permanent ids, back-references to the binding and the template, and
manifests already marked as Karmada's. Tests and the sandbox use this builder so the
agent is exercised on realistic input.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

JSON = dict[str, Any]


def _template_metadata(manifest: JSON, work_namespace: str, work_name: str) -> None:
    metadata = manifest.setdefault("metadata", {})
    labels = metadata.setdefault("labels", {})
    labels["karmada.io/managed"] = "true"
    labels.setdefault("work.karmada.io/permanent-id", str(uuid.uuid4()))
    annotations = metadata.setdefault("annotations", {})
    annotations["work.karmada.io/namespace"] = work_namespace
    annotations["work.karmada.io/name"] = work_name
    annotations.setdefault("resourcetemplate.karmada.io/uid", str(uuid.uuid4()))
    annotations.setdefault("resourcetemplate.karmada.io/generation", "1")


def control_plane_work(
    cluster: str,
    name: str,
    manifests: list[JSON],
    *,
    suspend_dispatching: bool | None = None,
    preserve_resources_on_deletion: bool | None = None,
    conflict_resolution: str | None = None,
) -> JSON:
    namespace = f"karmada-es-{cluster}"
    binding_id = str(uuid.uuid4())
    first = manifests[0] if manifests else {}
    first_meta = first.get("metadata") or {}
    binding_name = f"{first_meta.get('name', name)}-{str(first.get('kind', 'object')).lower()}"
    work_manifests = [copy.deepcopy(m) for m in manifests]
    for manifest in work_manifests:
        _template_metadata(manifest, namespace, name)
        manifest["metadata"]["labels"]["resourcebinding.karmada.io/permanent-id"] = binding_id
    annotations: JSON = {
        "resourcebinding.karmada.io/name": binding_name,
        "resourcebinding.karmada.io/namespace": first_meta.get("namespace", "default"),
    }
    if conflict_resolution is not None:
        annotations["work.karmada.io/conflict-resolution"] = conflict_resolution
    spec: JSON = {"workload": {"manifests": work_manifests}}
    if suspend_dispatching is not None:
        spec["suspendDispatching"] = suspend_dispatching
    if preserve_resources_on_deletion is not None:
        spec["preserveResourcesOnDeletion"] = preserve_resources_on_deletion
    return {
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "finalizers": ["karmada.io/execution-controller"],
            "labels": {
                "resourcebinding.karmada.io/permanent-id": binding_id,
                "work.karmada.io/permanent-id": str(uuid.uuid4()),
            },
            "annotations": annotations,
        },
        "spec": spec,
    }


def deployment(
    name: str,
    *,
    namespace: str = "default",
    replicas: int = 1,
    requests: dict[str, str] | None = None,
) -> JSON:
    """A Deployment whose Pods the emulator's workload simulator runs."""
    labels = {"app": name}
    container: JSON = {"name": "app", "image": "nginx:1.27"}
    if requests:
        container["resources"] = {"requests": requests}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def configmap(name: str, data: dict[str, str] | None = None, *, namespace: str = "default") -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data if data is not None else {"k": name},
    }
