"""The real agent process through its life: apply, update, stop, changes while it is down, restart.

The agent runs as `python -m agent` (as in the container), so flags, logging, signal
handling and exit codes are the ones users get; kubectl checks what is on the member.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.kube.client import KubeClient
from agent.kube.errors import NotFoundError
from agent.resources import WORKS
from emulator.emulator import run_emulator
from emulator.works import control_plane_work

from .support import client_for, cluster_ready, condition, eventually, kubectl

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
JSON = dict[str, Any]


def deployment(name: str, replicas: int) -> JSON:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
            },
        },
    }


def configmap(name: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"owner": "karmada"},
    }


class AgentProcess:
    def __init__(self, karmada: Path, member: Path, log: Path) -> None:
        self.args = [
            sys.executable, "-m", "agent",
            f"--karmada-kubeconfig={karmada}", f"--kubeconfig={member}",
            f"--cluster-name={CLUSTER}", "--cluster-status-update-frequency=1s",
            "--metrics-bind-address=0", "--health-probe-bind-address=0",
        ]  # fmt: skip
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(*self.args, stdout=out, stderr=out)

    def alive(self) -> None:
        assert self.proc is not None
        assert self.proc.returncode is None, self.log.read_text()[-4000:]

    async def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), 30)


async def _applied(client: KubeClient, name: str, *, healthy: int) -> bool:
    try:
        work = await client.get(WORKS, name, namespace=ES)
    except NotFoundError:
        return False
    done = condition(work, "Applied")
    statuses = (work.get("status") or {}).get("manifestStatuses") or []
    return bool(
        done
        and done["status"] == "True"
        and sum(s.get("health") == "Healthy" for s in statuses) >= healthy
    )


async def _member_json(member: Path, kind: str, name: str) -> JSON | None:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(member), "get", kind, name, "-n", "default", "-o", "json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    if proc.returncode != 0:
        assert b"NotFound" in err, err.decode()
        return None
    return dict(json.loads(out))


@pytest.mark.timeout(150)
async def test_apply_update_restart_with_pending_changes(tmp_path: Path) -> None:
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member,
    ):
        karmada_kc = cp.write_kubeconfig(tmp_path / "karmada")
        member_kc = member.write_kubeconfig(tmp_path / "member")
        agent = AgentProcess(karmada_kc, member_kc, tmp_path / "agent.log")
        await agent.start()
        admin = await client_for(karmada_kc)
        try:

            async def ready() -> bool:
                agent.alive()
                return await cluster_ready(admin, CLUSTER)

            await eventually(ready, timeout=30, what="Cluster Ready")
            await admin.create(
                WORKS, control_plane_work(CLUSTER, "web", [deployment("web", 2)]), namespace=ES
            )
            await admin.create(
                WORKS, control_plane_work(CLUSTER, "old", [configmap("old")]), namespace=ES
            )
            await eventually(lambda: _applied(admin, "web", healthy=1), what="web applied, healthy")
            await eventually(lambda: _applied(admin, "old", healthy=1), what="old applied")
            shown = await kubectl(member_kc, "get", "deployment", "web", "-n", "default")
            assert "web" in shown

            # An update of the Work reaches the member.
            work = await admin.get(WORKS, "web", namespace=ES)
            work["spec"]["workload"]["manifests"][0]["spec"]["replicas"] = 3
            await admin.replace(WORKS, work)

            async def scaled() -> bool:
                live = await _member_json(member_kc, "deployment", "web")
                return bool(live and live["spec"]["replicas"] == 3)

            await eventually(scaled, what="the update on the member")

            assert await agent.terminate() == 0

            # While the agent is down: a new Work, a deleted Work, and drift on the member.
            await admin.create(
                WORKS, control_plane_work(CLUSTER, "new", [configmap("new")]), namespace=ES
            )
            await admin.delete(WORKS, "old", namespace=ES)
            old = await admin.get(WORKS, "old", namespace=ES)
            assert old["metadata"]["deletionTimestamp"]  # held by the agent's finalizer
            await kubectl(member_kc, "scale", "deployment", "web", "-n", "default", "--replicas=7")

            await agent.start()
            await eventually(lambda: _applied(admin, "new", healthy=1), what="new applied")

            async def converged() -> bool:
                agent.alive()
                web = await _member_json(member_kc, "deployment", "web")
                gone = await _member_json(member_kc, "configmap", "old") is None
                try:
                    await admin.get(WORKS, "old", namespace=ES)
                    work_gone = False
                except NotFoundError:
                    work_gone = True
                return bool(web and web["spec"]["replicas"] == 3 and gone and work_gone)

            await eventually(converged, timeout=30, what="drift put back and old removed")
            assert await _member_json(member_kc, "configmap", "new") is not None
            assert await agent.terminate() == 0
        finally:
            if agent.proc is not None and agent.proc.returncode is None:
                agent.proc.kill()
                await agent.proc.wait()
            await admin.close()
