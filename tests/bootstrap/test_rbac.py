"""The bootstrap prerequisites' RBAC is written once, in deploy/control-plane/prerequisites."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from bootstrap import rbac, render
from bootstrap.tokens import DEFAULT_GROUP
from emulator.controllers.seed import karmada_bootstrap_objects

PREREQUISITES = Path(__file__).resolve().parents[2] / "deploy" / "control-plane" / "prerequisites"


def kustomize(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [render.kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def test_what_bootstrap_creates_is_what_kubectl_applies() -> None:
    """An admin's `kubectl apply -k` and `token create --ensure-prerequisites` agree."""
    applied = sorted(kustomize(PREREQUISITES), key=key)
    assert sorted(rbac.prerequisite_rbac([DEFAULT_GROUP]), key=key) == applied
    assert [key(o) for o in applied] == [
        ("ClusterRole", "system:karmada:certificatesigningrequest:autoapprover"),
        ("ClusterRole", "system:karmada:certificatesigningrequest:selfautoapprover"),
        ("ClusterRoleBinding", "system:karmada:agent-autoapprove-bootstrap"),
        ("ClusterRoleBinding", "system:karmada:agent-autoapprove-certificate-rotation"),
        ("ClusterRoleBinding", "system:karmada:agent-bootstrap"),
        ("ClusterRoleBinding", "system:karmada:tunnel-server-token-review"),
        ("Role", "system:karmada:bootstrap-signer-clusterinfo"),
        ("Role", "system:karmada:tunnel-agent-token"),
        ("RoleBinding", "system:karmada:bootstrap-signer-clusterinfo"),
        ("RoleBinding", "system:karmada:tunnel-agent-token"),
        ("ServiceAccount", "karmada-tunnel-agent"),
    ]


def test_token_groups_replace_the_default_bootstrap_group_only() -> None:
    objects = {key(o): o for o in rbac.prerequisite_rbac(["g1", "g2"])}
    for name in ("system:karmada:agent-bootstrap", "system:karmada:agent-autoapprove-bootstrap"):
        subjects = objects["ClusterRoleBinding", name]["subjects"]
        assert [s["name"] for s in subjects] == ["g1", "g2"]
    rotation = objects[
        "ClusterRoleBinding", "system:karmada:agent-autoapprove-certificate-rotation"
    ]
    assert [s["name"] for s in rotation["subjects"]] == ["system:karmada:agents"]


def test_the_emulated_control_plane_is_seeded_with_the_same_rules() -> None:
    seeded = {key(o): o for o in karmada_bootstrap_objects("https://127.0.0.1:6443", b"PEM")}
    for obj in rbac.prerequisite_rbac([DEFAULT_GROUP]):
        assert seeded[key(obj)] == obj
    # Beside them: cluster-info, and upstream's rbac-generator, which bootstrap never creates.
    extra = sorted(set(seeded) - {key(o) for o in rbac.prerequisite_rbac([DEFAULT_GROUP])})
    assert extra == [
        ("ClusterRole", "system:karmada:agent-rbac-generator"),
        ("ClusterRoleBinding", "system:karmada:agent-rbac-generator"),
        ("ConfigMap", "cluster-info"),
    ]
