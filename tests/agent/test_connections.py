"""KubeconfigReloader: every replica follows the mounted control-plane kubeconfig."""

from __future__ import annotations

from pathlib import Path

import yaml

from agent.connections import KubeconfigReloader, load_karmada_config
from agent.kube.client import KubeClient
from agent.kube.resources import SELF_SUBJECT_REVIEWS
from agent.kube.transport import Transport
from agent.options import Options
from emulator.emulator import run_emulator


async def _whoami(client: KubeClient) -> str:
    review = await client.create(
        SELF_SUBJECT_REVIEWS,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    return str(review["status"]["userInfo"]["username"])


async def test_switches_only_when_the_credential_changes(tmp_path: Path) -> None:
    async with run_emulator(profile="karmada", name="karmada") as cp:
        path = tmp_path / "karmada-kubeconfig"
        cp.write_kubeconfig(
            path, user="system:karmada:agent:member1", groups=["system:karmada:agents"]
        )
        options = Options(cluster_name="member1", karmada_kubeconfig=str(path))
        transport = Transport(await load_karmada_config(options))
        client = KubeClient(transport)
        reloader = KubeconfigReloader(options, transport)
        try:
            assert await _whoami(client) == "system:karmada:agent:member1"
            in_use = transport.config
            assert not await reloader.check_once()  # nothing changed

            # The same credential written again in another layout (as after this agent's own
            # rotation, when kubelet refreshes the mounted Secret): no reload, no cut watches.
            same = yaml.safe_load(path.read_text())
            path.write_text(yaml.safe_dump(same, default_flow_style=True))
            assert not await reloader.check_once()
            assert transport.config is in_use

            # A new certificate (the leader rotated it, or an operator replaced it).
            cp.write_kubeconfig(
                path, user="system:karmada:agent:rotated", groups=["system:karmada:agents"]
            )
            assert await reloader.check_once()
            assert transport.config.client_cert_pem != in_use.client_cert_pem
            assert await _whoami(client) == "system:karmada:agent:rotated"
            # The flags' rate limits survive the reload.
            assert (transport.config.qps, transport.config.burst) == (in_use.qps, in_use.burst)
            assert reloader.reloads == 1

            # A broken file is reported and ignored; the working credential stays.
            path.write_text("clusters: [")
            assert not await reloader.check_once()
            assert await _whoami(client) == "system:karmada:agent:rotated"
        finally:
            await client.close()
