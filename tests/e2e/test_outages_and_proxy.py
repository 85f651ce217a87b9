"""The agent survives a control-plane outage (with history compacted meanwhile) and works
through an HTTP proxy, dialling out only."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from agent.kube.client import KubeClient
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, LEASES
from agent.resources import WORKS
from emulator.emulator import run_emulator
from emulator.works import configmap, control_plane_work

from . import support
from .support import client_for, cluster_ready, eventually, work_applied

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"


@contextlib.asynccontextmanager
async def running_agent(karmada_kc: Path, member_kc: Path) -> AsyncIterator[asyncio.Task[int]]:
    async with support.running_agent(
        karmada_kc,
        member_kc,
        CLUSTER,
        "--cluster-status-update-frequency=1s",
        "--cluster-lease-duration=4s",
    ) as (task, _):
        yield task


async def ready(admin: KubeClient, agent: asyncio.Task[int]) -> bool:
    assert not agent.done(), f"the agent exited with {agent.result()}"
    return await cluster_ready(admin, CLUSTER)


async def applied(admin: KubeClient, name: str) -> bool:
    return await work_applied(admin, CLUSTER, name) is not None


async def on_member(member: KubeClient, name: str) -> bool:
    try:
        await member.get(CONFIGMAPS, name, namespace="default")
    except NotFoundError:
        return False
    return True


@pytest.mark.timeout(120)
async def test_control_plane_outage_with_compacted_history(tmp_path: Path) -> None:
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member_emu,
    ):
        karmada_kc = cp.write_kubeconfig(tmp_path / "karmada")
        member_kc = member_emu.write_kubeconfig(tmp_path / "member")
        admin = cp.api.loopback()  # in-process: reaches the emulator while its front is down
        member = await client_for(member_kc)
        admin_http = await client_for(karmada_kc)
        try:
            async with running_agent(karmada_kc, member_kc) as agent:
                await eventually(lambda: ready(admin_http, agent), timeout=30, what="Ready")
                await admin_http.create(
                    WORKS,
                    control_plane_work(CLUSTER, "before", [configmap("before")]),
                    namespace=ES,
                )
                await eventually(lambda: applied(admin_http, "before"), what="before applied")
                works_lists = cp.accounting.counts(verb="list", resource="works")
                lease_before = (await admin_http.get(LEASES, CLUSTER, namespace="karmada-cluster"))[
                    "spec"
                ]["renewTime"]

                # The control plane goes away; meanwhile one Work is created, one deleted, and
                # its history is compacted, so that resuming watches get 410 and must relist.
                await cp.faults.go_offline()
                work = control_plane_work(CLUSTER, "during", [configmap("during")])
                await admin.create(f"/apis/work.karmada.io/v1alpha1/namespaces/{ES}/works", work)
                await admin.delete(f"/apis/work.karmada.io/v1alpha1/namespaces/{ES}/works/before")
                await cp.faults.compact()
                await cp.faults.come_back()

                await eventually(
                    lambda: applied(admin_http, "during"), timeout=30, what="during applied"
                )
                await eventually(lambda: on_member(member, "during"), what="during on the member")

                async def before_gone() -> bool:
                    return not await on_member(member, "before") and not await applied(
                        admin_http, "before"
                    )

                await eventually(before_gone, timeout=30, what="before removed after the outage")
                assert cp.accounting.counts(verb="list", resource="works") > works_lists  # relisted

                async def lease_renewed() -> bool:
                    lease = await admin_http.get(LEASES, CLUSTER, namespace="karmada-cluster")
                    return bool(lease["spec"]["renewTime"] != lease_before)

                await eventually(lease_renewed, timeout=15, what="the heartbeat to resume")
                assert not agent.done()
        finally:
            await member.close()
            await admin_http.close()


class ConnectProxy:
    """A minimal HTTP CONNECT proxy on 127.0.0.1 that records where clients tunnel to."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> ConnectProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = request.split(b"\r\n", 1)[0].decode().split(" ", 2)
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            writer.close()
            return
        self.targets.append(target)
        host, port = target.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@pytest.mark.timeout(90)
async def test_agent_reaches_the_control_plane_through_a_proxy(tmp_path: Path) -> None:
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member_emu,
        ConnectProxy() as proxy,
    ):
        admin_kc = cp.write_kubeconfig(tmp_path / "karmada-admin")
        config = yaml.safe_load(admin_kc.read_text())
        config["clusters"][0]["cluster"]["proxy-url"] = proxy.url
        proxied = tmp_path / "karmada-via-proxy"
        proxied.write_text(yaml.safe_dump(config))
        proxied.chmod(0o600)
        member_kc = member_emu.write_kubeconfig(tmp_path / "member")
        admin = await client_for(admin_kc)
        try:
            async with running_agent(proxied, member_kc) as agent:
                await eventually(
                    lambda: ready(admin, agent), timeout=30, what="Ready via the proxy"
                )
                await admin.create(
                    WORKS,
                    control_plane_work(CLUSTER, "proxied", [configmap("proxied")]),
                    namespace=ES,
                )
                await eventually(lambda: applied(admin, "proxied"), what="applied via the proxy")
            cp_address = cp.url.removeprefix("https://")
            assert proxy.targets
            assert set(proxy.targets) == {cp_address}
        finally:
            await admin.close()
