"""KubeconfigReloader: every replica follows the mounted control-plane kubeconfig."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.app import Agent
from agent.certificates import certificate_lifetime, serial_number
from agent.connections import KubeconfigReloader, load_karmada_config
from agent.kube.client import KubeClient
from agent.kube.resources import SELF_SUBJECT_REVIEWS
from agent.kube.transport import Transport
from agent.options import Options
from emulator.emulator import run_emulator
from emulator.kubeconfig import build_kubeconfig, write_kubeconfig
from tests.agent.controllers.clusterenv import emulator_pair
from tests.polling import eventually

AGENT_USER = "system:karmada:agent:member1"


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


async def test_an_older_certificate_of_the_same_identity_is_not_switched_to(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kubeconfig Secret recreated from an old copy while certRotation's newer certificate
    is not saved yet: the agent keeps the newer one (the old one may have expired)."""
    caplog.set_level(logging.INFO)
    async with run_emulator(profile="karmada", name="karmada") as cp:
        now = datetime.now(UTC)

        def kubeconfig_with(issued: datetime, lifetime: timedelta) -> dict[str, Any]:
            cert, key = cp.ca.issue(
                AGENT_USER,
                ("system:karmada:agents",),
                usage="client",
                lifetime=lifetime,
                now=issued,
            )
            return build_kubeconfig(cp.url, cp.ca_pem, client_cert_pem=cert, client_key_pem=key)

        path = tmp_path / "karmada-kubeconfig"
        write_kubeconfig(path, kubeconfig_with(now, timedelta(hours=1)))
        options = Options(cluster_name="member1", karmada_kubeconfig=str(path))
        transport = Transport(await load_karmada_config(options))
        reloader = KubeconfigReloader(options, transport)
        try:
            in_use = transport.config
            write_kubeconfig(path, kubeconfig_with(now - timedelta(minutes=30), timedelta(hours=1)))
            assert not await reloader.check_once()
            assert transport.config is in_use
            assert "changed to an older certificate of the identity in use" in caplog.text

            write_kubeconfig(path, kubeconfig_with(now, timedelta(hours=2)))
            assert await reloader.check_once()
            assert transport.config.client_cert_pem != in_use.client_cert_pem
        finally:
            await transport.close()


@pytest.mark.parametrize(
    ("issued", "said"),
    [(timedelta(hours=-2), "expired at"), (timedelta(hours=1), "is not valid before")],
    ids=["expired", "not-yet-valid"],
)
async def test_a_refused_certificate_is_named_at_the_first_401(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, issued: timedelta, said: str
) -> None:
    """An agent whose control-plane client certificate expired (or is not valid yet) says so at
    the first 401, once, with the certificate's notAfter by the control plane's clock, and sets
    the expiry metric, though certRotation never ran."""
    caplog.set_level(logging.INFO)
    async with emulator_pair(tmp_path) as pair:
        cert, key = pair.karmada.ca.issue(
            AGENT_USER,
            ("system:karmada:agents",),
            usage="client",
            lifetime=timedelta(hours=1),
            now=datetime.now(UTC) + issued,
        )
        kubeconfig = write_kubeconfig(
            tmp_path / "agent.kubeconfig",
            build_kubeconfig(
                pair.karmada.url, pair.karmada.ca_pem, client_cert_pem=cert, client_key_pem=key
            ),
        )
        not_after = certificate_lifetime(cert).not_after
        agent = Agent(
            pair.options(karmada_kubeconfig=str(kubeconfig)),
            stop_event=asyncio.Event(),
            install_signal_handlers=False,
        )
        task = asyncio.create_task(agent.run())

        def refusals() -> list[str]:
            return [
                r.getMessage()
                for r in caplog.records
                if "refused the client certificate" in r.getMessage()
            ]

        try:
            await eventually(refusals, timeout=20, what="the refusal logged")
        finally:
            agent.stop_event.set()
            await asyncio.wait_for(task, 30)
        assert len(refusals()) == 1, refusals()
        (message,) = refusals()
        assert f"for {AGENT_USER} (serial {serial_number(cert):x})" in message
        assert said in message
        assert not_after.isoformat() in message
        assert "by the control plane's clock" in message
        expiry = agent.registry.get_sample_value(
            "karmada_agent_client_certificate_expiration_seconds", {"member_cluster": "member1"}
        )
        assert expiry == not_after.timestamp()
