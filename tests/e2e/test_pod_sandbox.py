"""The pod sandbox's kubelet rules (no mount namespace needed): $(VAR) expansion in command and
args, env from values and fieldRefs, the image's entrypoint mapped to this checkout's agent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .pod_sandbox import PodProcess, container_env, expand

POD = {
    "metadata": {"name": "karmada-agent-6d9f-x2k4q", "namespace": "karmada-system"},
    "status": {"podIP": "127.10.20.30"},
}


def test_expand_as_the_kubelet() -> None:
    env = {"POD_IP": "127.10.20.30", "PORT": "8080"}
    assert expand("--metrics-bind-address=$(POD_IP):$(PORT)", env) == (
        "--metrics-bind-address=127.10.20.30:8080"
    )
    assert expand("$(UNDEFINED) stays", env) == "$(UNDEFINED) stays"
    assert expand("$$(POD_IP) is escaped", env) == "$(POD_IP) is escaped"
    assert expand("$POD_IP is not a reference", env) == "$POD_IP is not a reference"


def test_container_env_values_and_field_refs() -> None:
    container = {
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "ADDRESS", "value": "$(POD_IP):10357"},
        ]
    }
    assert container_env(POD, container) == {
        "POD_IP": "127.10.20.30",
        "POD_NAME": "karmada-agent-6d9f-x2k4q",
        "ADDRESS": "127.10.20.30:10357",
    }
    with pytest.raises(AssertionError, match="only value and fieldRef"):
        container_env(POD, {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {}}}]})


def test_the_image_entrypoint_is_this_agent(tmp_path: Path) -> None:
    container = {
        "command": ["/bin/karmada-agent", "--metrics-bind-address=$(POD_IP):8080"],
        "args": ["--v=2"],
    }
    process = PodProcess(POD, container, {}, {"POD_IP": "127.10.20.30"}, tmp_path)
    assert process.argv == [
        sys.executable, "-m", "agent", "--metrics-bind-address=127.10.20.30:8080", "--v=2",
    ]  # fmt: skip
    with pytest.raises(AssertionError, match="not /bin/karmada-agent"):
        PodProcess(POD, {"command": ["/usr/bin/other"]}, {}, {}, tmp_path)
