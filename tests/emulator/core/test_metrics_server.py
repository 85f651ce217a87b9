"""metrics.k8s.io on the member emulator, as metrics-server serves it behind the aggregation
layer: `kubectl top` reads it, the APIService is Available, usage follows the pods."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from emulator.controllers import Knobs
from emulator.emulator import Emulator, run_emulator
from emulator.metrics_server import CPU_ANNOTATION, MEMORY_ANNOTATION
from tests import polling

PODS = "/api/v1/namespaces/default/pods"


@pytest_asyncio.fixture
async def member() -> AsyncIterator[Emulator]:
    async with run_emulator(
        "member", name="metrics", knobs=Knobs(workload_ready_delay=0.05)
    ) as emu:
        yield emu


async def kubectl(config: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(config), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def running(emu: Emulator, name: str, **metadata: Any) -> None:
    containers = [
        {"name": "app", "image": "nginx",
         "resources": {"requests": {"cpu": "400m", "memory": "256Mi"}}},
        {"name": "sidecar", "image": "busybox"},
    ]  # fmt: skip
    async with emu.client() as client:
        body = {"metadata": {"name": name, **metadata}, "spec": {"containers": containers}}
        (await client.post(PODS, json=body)).raise_for_status()
        await polling.eventually(
            lambda: client.get(f"{PODS}/{name}"),
            until=lambda r: r.json().get("status", {}).get("phase") == "Running",
            what=f"pod {name} running",
        )


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()[1:]]


async def test_the_apiservice_is_metrics_servers_and_available(
    member: Emulator, tmp_path: Path
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    code, out, _ = await kubectl(
        config, "get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "json"
    )
    assert code == 0
    apiservice = json.loads(out)
    assert apiservice["spec"]["service"] == {
        "name": "metrics-server",
        "namespace": "kube-system",
        "port": 443,
    }
    available = {c["type"]: c for c in apiservice["status"]["conditions"]}["Available"]
    assert (available["status"], available["reason"]) == ("True", "Passed")


async def test_kubectl_top_pods_reads_each_containers_usage(
    member: Emulator, tmp_path: Path
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "requested")
    await running(
        member, "annotated", annotations={CPU_ANNOTATION: "250m", MEMORY_ANNOTATION: "100Mi"}
    )
    code, out, err = await kubectl(config, "top", "pods", "--containers")
    assert code == 0, err
    rows = {(r[0], r[1]): (r[2], r[3]) for r in table(out)}
    # Half of what a container requests; what the annotations say for every container.
    assert rows[("requested", "app")] == ("200m", "128Mi")
    assert rows[("annotated", "app")] == ("250m", "100Mi")
    assert rows[("annotated", "sidecar")] == ("250m", "100Mi")
    # The same answer every time: usage is a function of the pod.
    assert (await kubectl(config, "top", "pods", "--containers"))[1] == out
    code, out, _ = await kubectl(config, "top", "pod", "annotated")
    assert code == 0
    assert table(out) == [["annotated", "500m", "200Mi"]]


async def test_kubectl_top_nodes_sums_the_pods_on_each_node(
    member: Emulator, tmp_path: Path
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(
        member, "annotated", annotations={CPU_ANNOTATION: "250m", MEMORY_ANNOTATION: "100Mi"}
    )
    async with member.client() as client:
        node = (await client.get(f"{PODS}/annotated")).json()["spec"]["nodeName"]
        nodes = [n["metadata"]["name"] for n in (await client.get("/api/v1/nodes")).json()["items"]]
    code, out, err = await kubectl(config, "top", "nodes", "--no-headers=false")
    assert code == 0, err
    rows = {r[0]: (r[1], r[3]) for r in table(out)}
    assert set(rows) == set(nodes)
    assert rows[node] == ("600m", "712Mi")  # 100m and 512Mi of its own, and the pod's
    for other in set(nodes) - {node}:
        assert rows[other] == ("100m", "512Mi")


async def test_metrics_are_authorized_by_the_members_rbac(member: Emulator, tmp_path: Path) -> None:
    await running(member, "web")
    config = member.write_kubeconfig(tmp_path / "nobody", user="nobody")
    code, _, err = await kubectl(config, "top", "pods")
    assert code == 1
    assert 'User "nobody" cannot list resource "pods" in API group "metrics.k8s.io"' in err


async def test_only_the_front_proxy_may_call_the_metrics_server(member: Emulator) -> None:
    """A client that goes around the aggregation layer is not trusted with a user name."""
    assert member.metrics_server is not None
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.get(
            f"{member.metrics_server.url}/apis/metrics.k8s.io/v1beta1/pods",
            headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"},
        )
    assert response.status_code == 401
