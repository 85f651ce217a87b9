"""A FieldMeta stand-in answering like the Deployment schema does for the paths used here."""

from __future__ import annotations

from typing import Any

from emulator.fieldmeta import UNKNOWN, FieldInfo

POD = ("spec", "template", "spec")
CONTAINERS = (*POD, "containers")

_TABLE: dict[tuple[str, ...], FieldInfo] = {
    CONTAINERS: FieldInfo(
        list_type="map", list_map_keys=("name",), patch_merge_key="name", patch_strategy="merge"
    ),
    (*CONTAINERS, "ports"): FieldInfo(
        list_type="map",
        list_map_keys=("containerPort", "protocol"),
        patch_merge_key="containerPort",
        patch_strategy="merge",
    ),
    (*CONTAINERS, "env"): FieldInfo(
        list_type="map", list_map_keys=("name",), patch_merge_key="name", patch_strategy="merge"
    ),
    (*CONTAINERS, "args"): FieldInfo(list_type="atomic"),
    (*POD, "volumes"): FieldInfo(
        list_type="map",
        list_map_keys=("name",),
        patch_merge_key="name",
        patch_strategy="merge,retainKeys",
    ),
    ("metadata", "finalizers"): FieldInfo(list_type="set", patch_strategy="merge"),
    ("metadata", "ownerReferences"): FieldInfo(
        list_type="map", list_map_keys=("uid",), patch_merge_key="uid", patch_strategy="merge"
    ),
    ("spec", "strategy"): FieldInfo(patch_strategy="retainKeys"),
    ("spec", "selector"): FieldInfo(map_type="atomic"),
    ("spec", "replaced"): FieldInfo(patch_strategy="replace"),
    ("status", "conditions"): FieldInfo(
        list_type="map", list_map_keys=("type",), patch_merge_key="type", patch_strategy="merge"
    ),
    # Only strategic-merge tags, as old built-in schemas publish them.
    ("spec", "tagged"): FieldInfo(patch_merge_key="id", patch_strategy="merge"),
    ("spec", "taggedSet"): FieldInfo(patch_strategy="merge"),
}


class DeploymentMeta:
    def field(self, path: tuple[str, ...]) -> FieldInfo:
        return _TABLE.get(path, UNKNOWN)


META = DeploymentMeta()


def deployment(**spec_overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1"}]},
        },
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }
