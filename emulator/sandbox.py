"""`make sandbox`: the agent's main job, end to end, on an emulated control plane and member.

Starts an emulated Karmada control plane and member cluster, runs the real
`karmada-agent` process between them, creates Works as the control plane would,
shows progress until every Work is applied and healthy, shows the Cluster and the
Works as kubectl sees them, deletes one Work and shows its objects go. Exits 0 on
success; `--keep` leaves everything running for poking around with kubectl.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent.karmada.names import execution_namespace
from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, NAMESPACES
from agent.kube.transport import Transport
from agent.resources import CLUSTERS, RESOURCE_INTERPRETER_CUSTOMIZATIONS, WORKS

from .emulator import Emulator, run_emulator
from .works import control_plane_work

CLUSTER = "member1"
NAMESPACE = "sandbox"
JSON = dict[str, Any]


def _labels(app: str) -> JSON:
    return {"app": app}


def sandbox_works() -> list[JSON]:
    """A web app (Deployment, Service, ConfigMap), a batch Job, and a CRD with one object (whose
    health and status the control plane's customization interprets)."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "web-config", "namespace": NAMESPACE},
        "data": {"greeting": "hello from karmada"},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NAMESPACE, "labels": _labels("web")},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": _labels("web")},
            "template": {
                "metadata": {"labels": _labels("web")},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80}],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ]
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": NAMESPACE},
        "spec": {"selector": _labels("web"), "ports": [{"port": 80, "targetPort": 80}]},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi", "namespace": NAMESPACE},
        "spec": {
            "backoffLimit": 2,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "pi",
                            "image": "perl:5.40",
                            "command": ["perl", "-e", "print 3.14"],
                        }
                    ],
                }
            },
        },
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {
                "plural": "crontabs",
                "singular": "crontab",
                "kind": "CronTab",
                "shortNames": ["ct"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "cronSpec": {"type": "string"},
                                        "image": {"type": "string"},
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    crontab = {
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "nightly", "namespace": NAMESPACE},
        "spec": {"cronSpec": "0 3 * * *", "image": "backup:1.0"},
    }
    return [
        control_plane_work(CLUSTER, "sandbox-namespace", [namespace]),
        control_plane_work(CLUSTER, "web-config", [config]),
        control_plane_work(CLUSTER, "web", [deployment, service]),
        control_plane_work(CLUSTER, "pi", [job]),
        control_plane_work(CLUSTER, "crontab", [crd, crontab]),
    ]


def crontab_customization() -> JSON:
    """The control plane's rules for CronTab, which has no status of its own: healthy once it
    names an image, the schedule reflected as its status."""
    return {
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "crontabs"},
        "spec": {
            "target": {"apiVersion": "stable.example.com/v1", "kind": "CronTab"},
            "customizations": {
                "healthInterpretation": {
                    "luaScript": "function InterpretHealth(obj)\n"
                    "  return obj.spec.image ~= nil\nend\n"
                },
                "statusReflection": {
                    "luaScript": "function ReflectStatus(obj)\n"
                    "  return {schedule = obj.spec.cronSpec, image = obj.spec.image}\nend\n"
                },
            },
        },
    }


def _interpreted(works: list[JSON]) -> JSON | None:
    for work in works:
        for entry in (work.get("status") or {}).get("manifestStatuses") or []:
            if entry.get("identifier", {}).get("kind") == "CronTab" and entry.get("status"):
                return dict(entry["status"])
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait(what: str, check: Callable[[], Awaitable[bool]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.2)  # poll interval of a wait-for-condition loop


def _say(text: str = "") -> None:
    print(text, flush=True)


async def _kubectl(kubeconfig: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    return out.decode()


def _applied(work: JSON) -> str:
    for condition in (work.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Applied":
            return str(condition.get("status"))
    return "-"


def _health(work: JSON) -> str:
    statuses = (work.get("status") or {}).get("manifestStatuses") or []
    total = len((work.get("spec") or {}).get("workload", {}).get("manifests") or [])
    healthy = sum(1 for s in statuses if s.get("health") == "Healthy")
    return f"{healthy}/{total} healthy"


def _done(work: JSON) -> bool:
    return (
        _applied(work) == "True"
        and _health(work).split("/")[0] == _health(work).split("/")[1].split()[0]
    )


class Sandbox:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.karmada_kubeconfig = directory / "karmada.kubeconfig"
        self.member_kubeconfig = directory / "member.kubeconfig"
        self.agent_log = directory / "agent.log"
        self.agent: asyncio.subprocess.Process | None = None

    async def start_agent(self) -> None:
        health = _free_port()
        log = self.agent_log.open("wb")
        self.agent = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agent",
            f"--karmada-kubeconfig={self.karmada_kubeconfig}",
            f"--kubeconfig={self.member_kubeconfig}",
            f"--cluster-name={CLUSTER}",
            "--cluster-api-endpoint=https://member1.example:6443",
            "--leader-elect=false",
            "--cluster-status-update-frequency=2s",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{health}",
            stdout=log, stderr=log,
        )  # fmt: skip
        log.close()

    async def stop_agent(self) -> int:
        if self.agent is None or self.agent.returncode is not None:
            return self.agent.returncode if self.agent and self.agent.returncode is not None else 0
        self.agent.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.agent.wait(), 30)
        except TimeoutError:
            self.agent.kill()
            return await self.agent.wait()

    def agent_alive(self) -> None:
        if self.agent is not None and self.agent.returncode is not None:
            tail = self.agent_log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the agent exited with code {self.agent.returncode}:\n{tail}")


async def _client(kubeconfig: Path) -> KubeClient:
    config = await load_kubeconfig(str(kubeconfig), user_agent="karmada-sandbox")
    return KubeClient(Transport(config))


async def _demo(sandbox: Sandbox, karmada: KubeClient, member: KubeClient, timeout: float) -> None:
    es = execution_namespace(CLUSTER)

    async def registered() -> bool:
        sandbox.agent_alive()
        try:
            cluster = await karmada.get(CLUSTERS, CLUSTER)
            await karmada.get(NAMESPACES, es)
        except NotFoundError:
            return False
        ready = [
            c
            for c in (cluster.get("status") or {}).get("conditions") or ()
            if c.get("type") == "Ready"
        ]
        return bool(ready and ready[0].get("status") == "True")

    _say("[2/5] waiting for the agent to register the Cluster and report it Ready ...")
    await _wait("the Cluster to be Ready", registered, timeout)
    _say(f"      Cluster {CLUSTER} is Ready; execution namespace {es} exists.")

    _say("[3/5] creating Works as the Karmada control plane would ...")
    await karmada.create(RESOURCE_INTERPRETER_CUSTOMIZATIONS, crontab_customization())
    _say("      created resourceinterpretercustomization crontabs (health and status of CronTab)")
    for work in sandbox_works():
        await karmada.create(WORKS, work, namespace=es)
        _say(f"      created work {es}/{work['metadata']['name']}")
    last = ""

    async def all_applied() -> bool:
        nonlocal last
        sandbox.agent_alive()
        works = (await karmada.list(WORKS, namespace=es)).get("items") or []
        table = "\n".join(
            f"      {w['metadata']['name']:<20} applied={_applied(w):<6} {_health(w)}"
            for w in works
        )
        if table != last:
            _say(table + "\n")
            last = table
        return bool(works) and all(_done(w) for w in works) and bool(_interpreted(works))

    await _wait("every Work to be applied and healthy", all_applied, timeout)
    works = (await karmada.list(WORKS, namespace=es)).get("items") or []
    _say(f"      the CronTab's status, as its customization reflects it: {_interpreted(works)}")

    _say("[4/5] the control plane's view (kubectl get clusters; kubectl get works -A):")
    _say(await _kubectl(sandbox.karmada_kubeconfig, "get", "clusters", "-o", "wide"))
    _say(await _kubectl(sandbox.karmada_kubeconfig, "get", "works", "-A"))
    _say("      the member's view (kubectl get deploy,svc,cm,job,crontabs -n sandbox):")
    _say(
        await _kubectl(
            sandbox.member_kubeconfig, "get", "deploy,svc,cm,job,crontabs", "-n", NAMESPACE
        )
    )

    _say("[5/5] deleting work web-config; its ConfigMap must go from the member ...")
    await karmada.delete(WORKS, "web-config", namespace=es)

    async def config_gone() -> bool:
        sandbox.agent_alive()
        for client, gvr, ns, name in (
            (member, CONFIGMAPS, NAMESPACE, "web-config"),
            (karmada, WORKS, es, "web-config"),
        ):
            try:
                await client.get(gvr, name, namespace=ns)
                return False
            except NotFoundError:
                continue
        return True

    await _wait("the ConfigMap and the Work to be gone", config_gone, timeout)
    _say("      ConfigMap sandbox/web-config is gone from the member and the Work is gone.")


async def run(keep: bool, directory: Path, timeout: float) -> int:
    if shutil.which("kubectl") is None:
        _say("kubectl is required for the sandbox's views")
        return 1
    sandbox = Sandbox(directory)
    _say("[1/5] starting an emulated Karmada control plane and member cluster ...")
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member_emu,
    ):
        cp.write_kubeconfig(sandbox.karmada_kubeconfig)
        member_emu.write_kubeconfig(sandbox.member_kubeconfig)
        _say(f"      control plane {cp.url}   kubeconfig {sandbox.karmada_kubeconfig}")
        _say(f"      member        {member_emu.url}   kubeconfig {sandbox.member_kubeconfig}")
        _say(f"      agent log     {sandbox.agent_log}")
        await sandbox.start_agent()
        karmada = await _client(sandbox.karmada_kubeconfig)
        member = await _client(sandbox.member_kubeconfig)
        try:
            await _demo(sandbox, karmada, member, timeout)
            if keep:
                await _keep(sandbox, cp, member_emu)
        finally:
            code = await sandbox.stop_agent()
            await karmada.close()
            await member.close()
        _say(f"the agent stopped on SIGTERM with exit code {code}")
        if code != 0:
            return 1
    _say("sandbox: all steps passed")
    return 0


async def _keep(sandbox: Sandbox, cp: Emulator, member: Emulator) -> None:
    _say("\n--keep: everything stays up until Ctrl-C. Try:")
    _say(f"  kubectl --kubeconfig {sandbox.karmada_kubeconfig} get clusters,works -A")
    _say(f"  kubectl --kubeconfig {sandbox.member_kubeconfig} get all -n {NAMESPACE}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make sandbox", description=__doc__)
    parser.add_argument("--keep", action="store_true", help="keep everything running until Ctrl-C")
    parser.add_argument("--dir", default=".sandbox", help="where kubeconfigs and the agent log go")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds allowed for each step")
    parser.add_argument(
        "--tunnel",
        action="store_true",
        help="a member the control plane cannot dial, reached through the stock proxy-server, "
        "karmada-aggregated-apiserver and the agent's tunnel (needs $KARMADA_UPSTREAM_BIN)",
    )
    args = parser.parse_args(argv)
    directory = Path(args.dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)  # kubeconfigs with admin tokens live here
    with contextlib.suppress(KeyboardInterrupt):
        if args.tunnel:
            from .sandbox_tunnel import run as run_tunnel

            return asyncio.run(run_tunnel(directory, args.timeout))
        return asyncio.run(run(args.keep, directory, args.timeout))
    return 130


if __name__ == "__main__":
    raise SystemExit(main())
