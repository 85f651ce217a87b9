"""Waiting for a CSR's certificate against the emulated control plane (watch, GET fallback,
denial, timeout), and certRotation staying idle when the credential is a token."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from prometheus_client import CollectorRegistry

from agent.app import Agent
from agent.certificates import (
    CertificateRequestError,
    Subject,
    certificate_lifetime,
    new_private_key,
    public_key_matches,
    request_certificate,
    serial_number,
    subject_of,
)
from agent.context import AgentContext
from agent.controllers.cert_rotation import CertRotation, client_certificate_of
from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig, StaticToken, load_kubeconfig, load_kubeconfig_dict
from agent.kube.resources import CERTIFICATE_SIGNING_REQUESTS, NAMESPACES, SECRETS
from agent.kube.transport import Transport
from agent.metrics import AgentMetrics
from agent.options import Options
from bootstrap.register import kubeconfig_secret
from emulator.controllers import Knobs
from emulator.emulator import Emulator, run_emulator
from emulator.kubeconfig import build_kubeconfig, dump_kubeconfig
from tests import polling

from .clusterenv import emulator_pair, kube_client

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
WAITER = "csr-waiter"


async def _grant(emu: Emulator, user: str, verbs: list[str]) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"{user}-csrs"},
        "rules": [
            {
                "apiGroups": ["certificates.k8s.io"],
                "resources": ["certificatesigningrequests"],
                "verbs": verbs,
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{user}-csrs"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": f"{user}-csrs",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    async with emu.client() as admin:
        for path, body in (
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
        ):
            response = await admin.post(path, json=body)
            assert response.status_code == 201, response.text


@asynccontextmanager
async def _waiter_client(emu: Emulator, tmp: Path, verbs: list[str]) -> AsyncIterator[KubeClient]:
    await _grant(emu, WAITER, verbs)
    async with kube_client(emu.write_kubeconfig(tmp / "waiter", user=WAITER)) as client:
        yield client


async def _csr_created(emu: Emulator, name: str) -> dict[str, Any]:
    async with emu.client() as admin:

        async def created() -> dict[str, Any] | None:
            response = await admin.get(f"{CSR_PATH}/{name}")
            assert response.status_code in (200, 404), response.text
            return response.json() if response.status_code == 200 else None

        data: dict[str, Any] = await polling.eventually(created, what=f"CSR {name}")
        return data


async def _decide(emu: Emulator, name: str, decision: str) -> None:
    csr = await asyncio.wait_for(_csr_created(emu, name), 5)
    csr["status"] = {
        "conditions": [
            {"type": decision, "status": "True", "reason": "ByTest", "message": "decided by test"}
        ]
    }
    async with emu.client() as admin:
        response = await admin.put(f"{CSR_PATH}/{name}/approval", json=csr)
        assert response.status_code == 200, response.text


def _request(client: KubeClient, name: str, key_pem: bytes, timeout: float = 10.0) -> Any:
    return asyncio.create_task(
        request_certificate(
            client,
            name,
            key_pem,
            Subject(WAITER, ("testers",)),
            expiration_seconds=3600,
            timeout=timeout,
        )
    )


async def test_wait_for_certificate_uses_a_watch(tmp_path: Path) -> None:
    async with (
        run_emulator("karmada") as cp,
        _waiter_client(cp, tmp_path, ["create", "get", "watch"]) as client,
    ):
        key_pem = new_private_key()
        task = _request(client, "waiter-watch", key_pem)
        await _decide(cp, "waiter-watch", "Approved")
        cert = await asyncio.wait_for(task, 10)
        assert public_key_matches(cert, key_pem)
        assert subject_of(cert) == Subject(WAITER, ("testers",))
        assert cp.accounting.watches_opened(resource="certificatesigningrequests", user=WAITER) >= 1
        # The created object starts the watch: no GET needed.
        assert (
            cp.accounting.counts(verb="get", resource="certificatesigningrequests", user=WAITER)
            == 0
        )


async def test_wait_falls_back_to_get_when_watch_is_forbidden(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Upstream's register grants only get and create on CSRs.
    caplog.set_level(logging.INFO, logger="agent.certificates")
    async with (
        run_emulator("karmada") as cp,
        _waiter_client(cp, tmp_path, ["create", "get"]) as client,
    ):
        key_pem = new_private_key()
        task = _request(client, "waiter-get", key_pem)
        await _decide(cp, "waiter-get", "Approved")
        cert = await asyncio.wait_for(task, 10)
        assert public_key_matches(cert, key_pem)
        assert (
            cp.accounting.counts(verb="get", resource="certificatesigningrequests", user=WAITER)
            >= 1
        )
        assert cp.accounting.watches_opened(resource="certificatesigningrequests", user=WAITER) == 0
        assert "may not watch CertificateSigningRequests" in caplog.text


async def test_denied_request_fails_at_once(tmp_path: Path) -> None:
    async with (
        run_emulator("karmada") as cp,
        _waiter_client(cp, tmp_path, ["create", "get", "watch"]) as client,
    ):
        task = _request(client, "waiter-denied", new_private_key(), timeout=30)
        await _decide(cp, "waiter-denied", "Denied")
        with pytest.raises(CertificateRequestError, match="waiter-denied was denied: ByTest"):
            await asyncio.wait_for(task, 10)


async def test_pending_request_times_out_with_a_hint(tmp_path: Path) -> None:
    async with (
        run_emulator("karmada") as cp,
        _waiter_client(cp, tmp_path, ["create", "get", "watch"]) as client,
    ):
        with pytest.raises(CertificateRequestError) as info:
            await _request(client, "waiter-pending", new_private_key(), timeout=0.5)
        message = str(info.value)
        assert "no certificate for CertificateSigningRequest waiter-pending after 0.5s" in message
        assert "still Pending" in message
        assert "kubectl certificate approve waiter-pending" in message
        csr = await client.get(CERTIFICATE_SIGNING_REQUESTS, "waiter-pending")
        assert csr["spec"]["expirationSeconds"] == 3600


# --- idle without a client certificate -----------------------------------------------------------


def _token_context(options: Options) -> AgentContext:
    config = ClientConfig(host="https://127.0.0.1:1", token_source=StaticToken("abc"))
    karmada = KubeClient(Transport(config))
    return AgentContext(
        options=options,
        cluster_name="member1",
        karmada=karmada,
        member=cast(Any, None),
        karmada_mapper=cast(Any, None),
        member_mapper=cast(Any, None),
        events=cast(Any, None),
        metrics=AgentMetrics(CollectorRegistry()),
        sources=cast(Any, None),
    )


@pytest.mark.parametrize(
    ("controllers", "level"),
    [(("*",), logging.INFO), (("*", "certRotation"), logging.WARNING)],
)
async def test_token_credential_leaves_the_controller_idle(
    controllers: tuple[str, ...], level: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.controllers.cert_rotation")
    ctx = _token_context(Options(cluster_name="member1", controllers=controllers))
    controller = CertRotation(ctx)
    await controller.start()
    try:
        assert controller.idle
        assert not controller.running
        records = [r for r in caplog.records if "not a client certificate" in r.getMessage()]
        assert [r.levelno for r in records] == [level]
    finally:
        await controller.stop()
        await ctx.karmada.close()


async def test_agent_with_a_token_runs_cert_rotation_idle(tmp_path: Path) -> None:
    async with emulator_pair(tmp_path) as pair:
        options = replace(pair.options(), controllers=("*",))
        agent = Agent(options, stop_event=asyncio.Event(), install_signal_handlers=False)
        task = asyncio.create_task(agent.run())
        try:
            await asyncio.wait_for(agent.leading.wait(), 20)
            assert agent.manager is not None
            rotation = next(r for r in agent.manager.running if r.name == "certRotation")
            assert isinstance(rotation, CertRotation)
            assert rotation.idle
            assert not rotation.running
            assert agent.manager.failed == {}
        finally:
            agent.stop_event.set()
            assert await asyncio.wait_for(task, 30) == 0
        listed = await pair.karmada_get(CSR_PATH)
        assert listed is not None
        assert listed["items"] == []


# --- one rotation, driven by check_once: the Secret paths ----------------------------------------

AGENT_USER = "system:karmada:agent:member1"
AGENT_GROUPS = ("system:karmada:agents",)


class _ConflictOnce(KubeClient):
    """A member client whose first PUT meets a concurrent writer (409 Conflict)."""

    conflicts = 0

    async def replace(self, gvr: Any, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if self.conflicts == 0:
            self.conflicts += 1
            meta = body.get("metadata") or {}
            await self.patch(
                gvr,
                meta["name"],
                {"metadata": {"labels": {"touched": "yes"}}},
                namespace=meta.get("namespace"),
            )
        return await super().replace(gvr, body, **kwargs)


@asynccontextmanager
async def _rotation_env(
    tmp: Path, *, secret: bool, member_class: type[KubeClient] = KubeClient
) -> AsyncIterator[tuple[CertRotation, Emulator, KubeClient, bytes]]:
    knobs = Knobs(csr_max_duration=timedelta(seconds=30), csr_backdate=timedelta(0))
    async with (
        run_emulator("karmada", knobs=knobs) as cp,
        run_emulator("member", name="member1") as member,
    ):
        await _grant(cp, AGENT_USER, ["create", "get", "watch"])
        await _grant_self_csr(cp, AGENT_USER)
        cert, key = cp.issue_client_cert(AGENT_USER, AGENT_GROUPS, lifetime=timedelta(seconds=30))
        kubeconfig = build_kubeconfig(
            cp.url,
            cp.ca_pem,
            cluster="karmada",
            user="member1",
            client_cert_pem=cert,
            client_key_pem=key,
        )
        karmada_config = await load_kubeconfig_dict(kubeconfig)
        member_config = await load_kubeconfig(str(member.write_kubeconfig(tmp / "member")))
        karmada = KubeClient(Transport(karmada_config))
        member_client = member_class(Transport(member_config))
        if secret:
            await member_client.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-system"}},
            )
            await member_client.create(
                SECRETS,
                kubeconfig_secret("karmada-system", dump_kubeconfig(kubeconfig)),
                namespace="karmada-system",
            )
        ctx = AgentContext(
            options=Options(cluster_name="member1"),
            cluster_name="member1",
            karmada=karmada,
            member=member_client,
            karmada_mapper=cast(Any, None),
            member_mapper=cast(Any, None),
            events=cast(Any, None),
            metrics=AgentMetrics(CollectorRegistry()),
            sources=cast(Any, None),
        )
        try:
            # 25 of the certificate's 30 seconds gone: under the default threshold (0.2).
            later = CertRotation(
                ctx, csr_timeout=10, now=lambda: datetime.now(UTC) + timedelta(seconds=25)
            )
            yield later, cp, member_client, cert
        finally:
            await karmada.close()
            await member_client.close()


async def _grant_self_csr(emu: Emulator, user: str) -> None:
    async with emu.client() as admin:
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "self-csr"},
            "rules": [
                {
                    "apiGroups": ["certificates.k8s.io"],
                    "resources": ["certificatesigningrequests/selfclusteragent"],
                    "verbs": ["create"],
                }
            ],
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "self-csr"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "self-csr",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
        for path, body in (
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
        ):
            response = await admin.post(path, json=body)
            assert response.status_code == 201, response.text


def _stored_cert(secret: dict[str, Any]) -> bytes | None:
    text = base64.b64decode(secret["data"]["karmada-kubeconfig"]).decode()
    return client_certificate_of(yaml.safe_load(text))


async def test_rotation_without_the_secret_switches_in_memory_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.controllers.cert_rotation")
    async with _rotation_env(tmp_path, secret=False) as (rotation, _cp, _member, old_cert):
        assert await rotation.check_once()
        ctx = rotation.ctx
        new_cert = ctx.karmada.transport.config.client_cert_pem
        assert new_cert is not None
        assert serial_number(new_cert) != serial_number(old_cert)
        assert subject_of(new_cert) == subject_of(old_cert)
        assert rotation.last_csr_name.startswith("member1-")
        assert "lives only in memory and will be lost at restart" in caplog.text
        csr = await ctx.karmada.get(CERTIFICATE_SIGNING_REQUESTS, rotation.last_csr_name)
        assert csr["spec"]["username"] == AGENT_USER
        assert csr["spec"]["usages"] == ["digital signature", "key encipherment", "client auth"]
        assert csr["spec"]["expirationSeconds"] == 600


async def test_rotation_rewrites_the_secret_after_a_conflict(tmp_path: Path) -> None:
    async with _rotation_env(tmp_path, secret=True, member_class=_ConflictOnce) as (
        rotation,
        _cp,
        member_client,
        old_cert,
    ):
        assert await rotation.check_once()
        assert isinstance(member_client, _ConflictOnce)
        assert member_client.conflicts == 1
        secret = await member_client.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
        assert secret["metadata"]["labels"] == {"touched": "yes"}  # the other writer's change kept
        stored = _stored_cert(secret)
        assert stored == rotation.ctx.karmada.transport.config.client_cert_pem
        assert stored is not None
        assert serial_number(stored) != serial_number(old_cert)
        text = base64.b64decode(secret["data"]["karmada-kubeconfig"]).decode()
        kubeconfig = yaml.safe_load(text)
        key = base64.b64decode(kubeconfig["users"][0]["user"]["client-key-data"])
        assert public_key_matches(stored, key)
        assert key.startswith(b"-----BEGIN EC PRIVATE KEY-----")
        assert kubeconfig["clusters"][0]["cluster"]["server"] == _cp.url


async def test_secret_of_another_identity_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.controllers.cert_rotation")
    async with _rotation_env(tmp_path, secret=True) as (rotation, cp, member_client, _old):
        other_cert, other_key = cp.issue_client_cert("system:karmada:agent:other", AGENT_GROUPS)
        secret = await member_client.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
        other = build_kubeconfig(
            cp.url, cp.ca_pem, user="other", client_cert_pem=other_cert, client_key_pem=other_key
        )
        secret["data"]["karmada-kubeconfig"] = base64.b64encode(
            dump_kubeconfig(other).encode()
        ).decode()
        await member_client.replace(SECRETS, secret, namespace="karmada-system")

        assert await rotation.check_once()
        after = await member_client.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
        assert _stored_cert(after) == other_cert
        assert (
            "is for system:karmada:agent:other, not for system:karmada:agent:member1" in caplog.text
        )


async def test_no_rotation_above_the_threshold(tmp_path: Path) -> None:
    async with _rotation_env(tmp_path, secret=True) as (rotation, cp, _member, old_cert):
        rotation.threshold = 0.01
        assert not await rotation.check_once()
        assert rotation.ctx.karmada.transport.config.client_cert_pem == old_cert
        assert cp.accounting.counts(verb="create", resource="certificatesigningrequests") == 0
        expiry = rotation.ctx.metrics.registry.get_sample_value(
            "karmada_agent_client_certificate_expiration_seconds", {"member_cluster": "member1"}
        )
        assert expiry == certificate_lifetime(old_cert).not_after.timestamp()
