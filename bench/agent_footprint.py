"""The agent's memory on a large member: trimmed node and pod caches.

    python -m bench.agent_footprint [--nodes 1000] [--pods 20000] [--out FILE]

Seeds the emulated member with many Nodes and realistic Pods (several containers, probes,
env, volumes, a full status) through the emulator's in-process client, starts the real agent
(`python -m agent`), waits until the Cluster's resourceSummary counts every pod, and reports
the agent's resident memory, the time to that first full status, and the size of the member's
Pod data for comparison. JSON goes to bench/results/agent_footprint.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.karmada.quantity import parse_quantity
from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.errors import NotFoundError
from agent.kube.transport import Transport
from agent.resources import CLUSTERS
from emulator.emulator import run_emulator

from .agent_latency import rss_mib
from .report import report

CLUSTER = "member1"
JSON = dict[str, Any]


def node(i: int) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"bench-node-{i}",
            "labels": {
                "kubernetes.io/hostname": f"bench-node-{i}",
                "topology.kubernetes.io/zone": f"z{i % 3}",
            },
        },
        "status": {
            "capacity": {
                "cpu": "16",
                "memory": "64Gi",
                "pods": "110",
                "ephemeral-storage": "200Gi",
            },
            "allocatable": {
                "cpu": "15",
                "memory": "62Gi",
                "pods": "110",
                "ephemeral-storage": "180Gi",
            },
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian GNU/Linux 12"},
            "images": [
                {"names": [f"registry.example/app-{j}:1.0"], "sizeBytes": 10**8} for j in range(20)
            ],
        },
    }


def pod(i: int, nodes: int) -> JSON:
    containers = [
        {
            "name": f"c{c}",
            "image": f"registry.example/app-{c}:1.0",
            "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"memory": "256Mi"},
            },
            "env": [{"name": f"VAR_{e}", "value": "x" * 40} for e in range(10)],
            "ports": [{"containerPort": 8080 + c, "protocol": "TCP"}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080 + c}, "periodSeconds": 5},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        }
        for c in range(3)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{i}",
            "namespace": f"ns-{i % 50}",
            "labels": {"app": f"app-{i % 200}", "pod-template-hash": "abcdef1234"},
            "annotations": {"note": "y" * 200},
        },
        "spec": {
            "nodeName": f"bench-node-{i % nodes}",
            "containers": containers,
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
        "status": {
            "phase": "Running",
            "podIP": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": f"c{c}", "ready": True, "restartCount": 0, "image": f"registry.example/app-{c}:1.0",
                 "imageID": "sha256:" + "0" * 64, "containerID": "containerd://" + "1" * 64,
                 "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
                for c in range(3)
            ],
        },
    }  # fmt: skip


async def seed(member: Any, nodes: int, pods: int) -> int:
    api = member.api.loopback()
    for i in range(nodes):
        created = await api.create("/api/v1/nodes", node(i))
        created["status"] = node(i)["status"]
        await api.update(f"/api/v1/nodes/{created['metadata']['name']}/status", created)
    for ns in range(50):
        await api.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{ns}"}},
        )
    size = 0
    for i in range(pods):
        body = pod(i, nodes)
        size += len(json.dumps(body))
        created = await api.create(f"/api/v1/namespaces/{body['metadata']['namespace']}/pods", body)
        created["status"] = body["status"]
        path = f"/api/v1/namespaces/{body['metadata']['namespace']}/pods/{body['metadata']['name']}/status"
        await api.update(path, created)
    return size


async def run(nodes: int, pods: int) -> JSON:
    directory = Path(tempfile.mkdtemp(prefix="agent-footprint-"))
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member,
    ):
        seeded = time.monotonic()
        pod_bytes = await seed(member, nodes, pods)
        seed_seconds = time.monotonic() - seeded
        karmada_kc = cp.write_kubeconfig(directory / "karmada")
        member_kc = member.write_kubeconfig(directory / "member")
        log = (directory / "agent.log").open("wb")
        started = time.monotonic()
        agent = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agent",
            f"--karmada-kubeconfig={karmada_kc}", f"--kubeconfig={member_kc}",
            f"--cluster-name={CLUSTER}", "--leader-elect=false",
            "--cluster-status-update-frequency=2s",
            "--metrics-bind-address=0", "--health-probe-bind-address=0",
            stdout=log, stderr=log,
        )  # fmt: skip
        client = KubeClient(
            Transport((await load_kubeconfig(str(karmada_kc))).with_rate_limits(0, 0))
        )
        peak = 0.0
        try:
            while True:
                peak = max(peak, rss_mib(agent.pid))
                try:
                    cluster = await client.get(CLUSTERS, CLUSTER)
                except NotFoundError:
                    cluster = {}
                allocated = ((cluster.get("status") or {}).get("resourceSummary") or {}).get(
                    "allocated"
                ) or {}
                # Counts are quantities in Go's canonical form: 4000 pods is "4k".
                if allocated.get("pods") and parse_quantity(allocated["pods"]).value == pods:
                    break
                if time.monotonic() - started > 300:
                    raise TimeoutError("the Cluster never counted every pod")
                await asyncio.sleep(0.25)  # sampling interval for RSS, not synchronisation
            first_status = time.monotonic() - started
            steady = rss_mib(agent.pid)
            summary = cluster["status"]["resourceSummary"]
        finally:
            agent.terminate()
            await agent.wait()
            await client.close()
            log.close()
    return {
        "nodes": nodes,
        "pods": pods,
        "member_pod_json_mib": round(pod_bytes / 2**20, 1),
        "seed_seconds": round(seed_seconds, 1),
        "first_full_status_seconds": round(first_status, 1),
        "agent_rss_peak_mib": round(peak, 1),
        "agent_rss_after_first_status_mib": round(steady, 1),
        "allocated": summary.get("allocated"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--out", default="bench/results/agent_footprint.json")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.nodes, args.pods))
    report(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
