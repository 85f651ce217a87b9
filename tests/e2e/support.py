"""Shared helpers for end-to-end tests: kubectl, API clients from kubeconfigs, waiting."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from agent.app import Agent, run
from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.errors import NotFoundError
from agent.kube.resources import SECRETS
from agent.kube.transport import Transport
from agent.options import Options, parse_options
from agent.resources import CLUSTERS, WORKS
from emulator.emulator import Emulator, run_emulator
from tests import polling

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


async def kubectl(kubeconfig: Path | None, *args: str, stdin: str | None = None) -> str:
    """Run the real kubectl; raise with its output when it fails."""
    command = ["kubectl", *(["--kubeconfig", str(kubeconfig)] if kubeconfig else []), *args]
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({proc.returncode}): {err.decode()}")
    return out.decode()


@contextlib.asynccontextmanager
async def kubectl_process(
    kubeconfig: Path, *args: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """The real kubectl running (a watch, a followed log): its output to read line by line, the
    process terminated at the end."""
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


async def client_for(kubeconfig: Path) -> KubeClient:
    return KubeClient(Transport(await load_kubeconfig(str(kubeconfig), user_agent="e2e-test")))


async def eventually(
    check: Callable[[], Awaitable[Any]], *, timeout: float = 20.0, what: str = "condition"
) -> Any:
    """Wait until `check()` returns a truthy value (returned); AssertionError counts as not yet."""
    return await polling.eventually(
        check, timeout=timeout, interval=0.05, what=what, retry_on=(AssertionError,)
    )


async def service_account_token(
    admin_kubeconfig: Path, namespace: str = "karmada-system", account: str = "karmada-agent-sa"
) -> str:
    """A token of `account`, from a service-account-token Secret the token controller fills."""
    admin = await client_for(admin_kubeconfig)
    name = f"{account}-token"
    try:
        await admin.create(
            SECRETS,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "annotations": {"kubernetes.io/service-account.name": account},
                },
                "type": "kubernetes.io/service-account-token",
            },
            namespace=namespace,
        )

        async def token() -> str:
            secret = await admin.get(SECRETS, name, namespace=namespace)
            data = (secret.get("data") or {}).get("token")
            return base64.b64decode(data).decode() if data else ""

        return str(await eventually(token, what="the ServiceAccount token"))
    finally:
        await admin.close()


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return None


async def cluster_ready(client: KubeClient, cluster: str) -> bool:
    """Whether the Cluster exists with Ready=True."""
    try:
        obj = await client.get(CLUSTERS, cluster)
    except NotFoundError:
        return False
    found = condition(obj, "Ready")
    return bool(found and found["status"] == "True")


async def work_applied(client: KubeClient, cluster: str, name: str) -> dict[str, Any] | None:
    """The Work in karmada-es-<cluster> once it has Applied=True, else None."""
    try:
        work = await client.get(WORKS, name, namespace=f"karmada-es-{cluster}")
    except NotFoundError:
        return None
    found = condition(work, "Applied")
    return work if found and found["status"] == "True" else None


@contextlib.asynccontextmanager
async def emulated_clusters(
    tmp: Path, cluster: str = "member1"
) -> AsyncIterator[tuple[Emulator, Emulator, Path, Path]]:
    """An emulated control plane and member, with admin kubeconfigs for both."""
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=cluster) as member,
    ):
        yield (
            cp,
            member,
            cp.write_kubeconfig(tmp / "karmada"),
            member.write_kubeconfig(tmp / "member"),
        )


def agent_options(karmada_kc: Path, member_kc: Path, cluster: str, *flags: str) -> Options:
    """The agent's options for these kubeconfigs: no listeners, a status pass a second, `flags`
    last (later flags win)."""
    return parse_options(
        [
            f"--karmada-kubeconfig={karmada_kc}",
            f"--kubeconfig={member_kc}",
            f"--cluster-name={cluster}",
            "--cluster-api-endpoint=https://member1.example:6443",
            "--cluster-status-update-frequency=1s",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
            *flags,
        ]
    )


@contextlib.asynccontextmanager
async def running_agent(
    karmada_kc: Path,
    member_kc: Path,
    cluster: str,
    *flags: str,
    registry: CollectorRegistry | None = None,
) -> AsyncIterator[tuple[asyncio.Task[int], Agent]]:
    """The agent in-process (no leader election, no listeners) with `flags`; stopped at the end,
    where it must exit 0."""
    options = parse_options(
        [
            f"--karmada-kubeconfig={karmada_kc}",
            f"--kubeconfig={member_kc}",
            f"--cluster-name={cluster}",
            "--leader-elect=false",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
            *flags,
        ]
    )
    stop = asyncio.Event()
    agents: list[Agent] = []
    task = asyncio.create_task(
        run(
            options,
            stop_event=stop,
            install_signal_handlers=False,
            registry=registry,
            on_agent=agents.append,
        )
    )
    try:
        await polling.eventually(lambda: _ready(bool(agents)), what="the agent created")
        yield task, agents[0]
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0


async def _ready(value: bool) -> bool:
    return value
