"""Shared set-up for the registration / cluster status / heartbeat / app tests: an emulated
Karmada control plane and member, kubeconfigs for both, and clients built as the agent builds
them (real HTTPS through agent.kube)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.transport import Transport
from agent.options import Options
from emulator.emulator import Emulator, run_emulator
from tests import polling

CLUSTERS_PATH = "/apis/cluster.karmada.io/v1alpha1/clusters"


@dataclass
class Pair:
    karmada: Emulator
    member: Emulator
    karmada_kubeconfig: Path
    member_kubeconfig: Path
    tmp: Path

    def options(self, **overrides: Any) -> Options:
        base = Options(
            cluster_name="member1",
            karmada_kubeconfig=str(self.karmada_kubeconfig),
            kubeconfig=str(self.member_kubeconfig),
            leader_elect=False,
            metrics_bind_address="127.0.0.1:0",
            health_probe_bind_address="127.0.0.1:0",
            cluster_status_update_frequency=timedelta(seconds=1),
            controllers=("clusterStatus",),
        )
        return replace(base, **overrides)

    async def karmada_get(self, path: str) -> dict[str, Any] | None:
        async with self.karmada.client() as client:
            response = await client.get(path)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    async def member_get(self, path: str) -> dict[str, Any] | None:
        async with self.member.client() as client:
            response = await client.get(path)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    async def cluster(self, name: str = "member1") -> dict[str, Any] | None:
        return await self.karmada_get(f"{CLUSTERS_PATH}/{name}")


@asynccontextmanager
async def emulator_pair(tmp: Path, member_name: str = "member1") -> AsyncIterator[Pair]:
    async with (
        run_emulator("karmada") as karmada,
        run_emulator("member", name=member_name) as member,
    ):
        yield Pair(
            karmada=karmada,
            member=member,
            karmada_kubeconfig=karmada.write_kubeconfig(tmp / "karmada.kubeconfig"),
            member_kubeconfig=member.write_kubeconfig(tmp / f"{member_name}.kubeconfig"),
            tmp=tmp,
        )


@asynccontextmanager
async def kube_client(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    client = KubeClient(Transport(await load_kubeconfig(str(kubeconfig))))
    try:
        yield client
    finally:
        await client.close()


async def wait_for(
    check: Callable[[], Awaitable[Any]], timeout: float = 10.0, interval: float = 0.05
) -> Any:
    """Poll an async check until it returns something truthy; fail after `timeout`."""
    return await polling.eventually(check, timeout=timeout, interval=interval)
