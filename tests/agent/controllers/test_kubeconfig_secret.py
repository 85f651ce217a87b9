"""Which Secret and key the agent's kubeconfig is mounted from (agent.controllers.kubeconfig_secret)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.controllers.kubeconfig_secret import mounted_secret


def pod(mounts: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [{"name": "sidecar"}, {"name": "agent", "volumeMounts": mounts}],
            "volumes": volumes,
        }
    }


def secret_volume(name: str, secret: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "secret": {"secretName": secret, **extra}}


@pytest.mark.parametrize(
    ("mounts", "volumes", "path", "expected"),
    [
        # karmadactl register: Secret karmada-kubeconfig at /etc/kubeconfig.
        (
            [{"name": "kubeconfig", "mountPath": "/etc/kubeconfig"}],
            [secret_volume("kubeconfig", "karmada-kubeconfig")],
            "/etc/kubeconfig/karmada-kubeconfig",
            ("karmada-kubeconfig", "karmada-kubeconfig", "kubeconfig"),
        ),
        # Karmada's Helm chart: <release>-kubeconfig, key kubeconfig.
        (
            [{"name": "kubeconfig", "mountPath": "/etc/kubeconfig/"}],
            [secret_volume("kubeconfig", "edge-kubeconfig")],
            "/etc/kubeconfig/kubeconfig",
            ("edge-kubeconfig", "kubeconfig", "kubeconfig"),
        ),
        # A key mapped to another file name.
        (
            [{"name": "creds", "mountPath": "/var/run/karmada"}],
            [secret_volume("creds", "agent", items=[{"key": "config", "path": "kube/agent.conf"}])],
            "/var/run/karmada/kube/agent.conf",
            ("agent", "config", "creds"),
        ),
        # One key mounted as a file with subPath.
        (
            [{"name": "creds", "mountPath": "/etc/agent.conf", "subPath": "agent.conf"}],
            [secret_volume("creds", "agent")],
            "/etc/agent.conf",
            ("agent", "agent.conf", "creds"),
        ),
        # The deepest mount wins.
        (
            [
                {"name": "etc", "mountPath": "/etc"},
                {"name": "kubeconfig", "mountPath": "/etc/kubeconfig"},
            ],
            [secret_volume("etc", "other"), secret_volume("kubeconfig", "karmada-kubeconfig")],
            "/etc/kubeconfig/karmada-kubeconfig",
            ("karmada-kubeconfig", "karmada-kubeconfig", "kubeconfig"),
        ),
    ],
)
def test_the_secret_volume_the_file_comes_from(
    mounts: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    path: str,
    expected: tuple[str, str, str],
) -> None:
    assert mounted_secret(pod(mounts, volumes), path) == expected


def test_no_secret_volume_provides_the_file() -> None:
    configmap = {"name": "kubeconfig", "configMap": {"name": "cm"}}
    mounts = [{"name": "kubeconfig", "mountPath": "/etc/kubeconfig"}]
    assert mounted_secret(pod(mounts, [configmap]), "/etc/kubeconfig/kubeconfig") is None
    secret = secret_volume("kubeconfig", "s", items=[{"key": "a", "path": "a"}])
    assert mounted_secret(pod(mounts, [secret]), "/etc/kubeconfig/kubeconfig") is None
    assert mounted_secret(pod(mounts, [secret_volume("kubeconfig", "s")]), "/elsewhere/x") is None
    assert mounted_secret({}, "/etc/kubeconfig/kubeconfig") is None
