"""The agent over a slow, lossy link (the test proxy between it and the control plane): Works
still flow at 300 ms RTT and 256 kbit/s, and while the link is down the agent's requests stay
few (measured as connection attempts at the proxy)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from agent.resources import WORKS
from emulator.emulator import run_emulator
from emulator.netproxy import LinkProxy
from emulator.works import configmap, control_plane_work

from .support import client_for, cluster_ready, eventually, running_agent, work_applied

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
# While the control plane is unreachable, with the default timings: connection attempts per
# second, averaged over the outage.
OUTAGE_ATTEMPTS_PER_SECOND = 1.0


def payload(name: str) -> dict[str, object]:
    """A ConfigMap of some size, so that the bandwidth limit shows."""
    return configmap(name, {"k": "v" * 2000})


def through(kubeconfig: Path, proxy: LinkProxy, out: Path) -> Path:
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://{proxy.address}"
    out.write_text(yaml.safe_dump(config))
    out.chmod(0o600)
    return out


@pytest.mark.timeout(120)
async def test_works_flow_over_a_slow_link_and_an_outage_costs_few_requests(
    tmp_path: Path,
) -> None:
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member_emu,
    ):
        host, port = cp.url.removeprefix("https://").rsplit(":", 1)
        async with LinkProxy(host, int(port)) as proxy:
            admin_kc = cp.write_kubeconfig(tmp_path / "karmada")
            agent_kc = through(admin_kc, proxy, tmp_path / "karmada-via-proxy")
            member_kc = member_emu.write_kubeconfig(tmp_path / "member")
            admin = await client_for(admin_kc)
            try:
                proxy.latency = 0.15  # 300 ms round trip
                proxy.bandwidth = 256 * 1024 // 8  # 256 kbit/s
                async with running_agent(agent_kc, member_kc, CLUSTER) as (task, _):
                    await eventually(
                        lambda: cluster_ready(admin, CLUSTER), timeout=60, what="Ready over it"
                    )
                    work = control_plane_work(CLUSTER, "slow", [payload("slow")])
                    await admin.create(WORKS, work, namespace=ES)
                    await eventually(
                        lambda: work_applied(admin, CLUSTER, "slow"), timeout=30, what="applied"
                    )

                    # The link goes down: open connections reset, new ones refused.
                    loop = asyncio.get_running_loop()
                    proxy.refuse = True
                    proxy.reset()
                    down_at = loop.time()
                    deadline = down_at + 12.0

                    async def outage_over() -> bool:
                        return loop.time() >= deadline

                    await eventually(outage_over, timeout=20, what="the outage window")
                    attempts = proxy.attempts_since(down_at)
                    rate = attempts / (loop.time() - down_at)
                    print(f"outage: {attempts} connection attempts in 12 s ({rate:.2f}/s)")
                    assert rate <= OUTAGE_ATTEMPTS_PER_SECOND, f"{attempts} attempts in 12 s"

                    after = control_plane_work(CLUSTER, "after", [payload("after")])
                    await admin.create(WORKS, after, namespace=ES)
                    proxy.refuse = False
                    back_at = loop.time()
                    # Within a reconnect slot (at most 15 s) the agent finds the link back, and
                    # its watches resume at once rather than after their own backoff.
                    await eventually(
                        lambda: work_applied(admin, CLUSTER, "after"), timeout=20, what="after"
                    )
                    assert not task.done()
                    print(
                        f"Work created during the outage applied {loop.time() - back_at:.1f}s "
                        "after the link came back"
                    )
            finally:
                await admin.close()
