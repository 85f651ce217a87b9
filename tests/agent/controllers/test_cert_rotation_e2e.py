"""certRotation end to end: certificates six seconds long, several rotations in one agent process.

The control plane signs CSRs for at most six seconds and without backdating, the agent's only
control-plane credential is such a certificate for system:karmada:agent:member1 under the RBAC of
deploy/control-plane, and the member holds the kubeconfig Secret that `register` writes. While
the agent rotates again and again, Works are created, updated and deleted; every change must
reach the member (no watch event lost), the Cluster must stay Ready, the Lease keep renewing, and
the Secret must follow each new certificate.
"""

from __future__ import annotations

import asyncio
import base64
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.app import Agent
from agent.certificates import Subject, certificate_lifetime, serial_number, subject_of
from agent.controllers.cert_rotation import CertRotation, client_certificate_of
from agent.kube.client import KubeClient
from agent.kube.errors import NotFoundError, UnauthorizedError
from agent.kube.resources import CERTIFICATE_SIGNING_REQUESTS, CONFIGMAPS, LEASES, SECRETS
from agent.kube.transport import Transport
from agent.options import parse_options
from agent.resources import CLUSTERS, WORKS
from bootstrap.register import kubeconfig_secret
from emulator.controllers import Knobs
from emulator.emulator import run_emulator
from emulator.kubeconfig import build_kubeconfig, dump_kubeconfig, write_kubeconfig
from emulator.works import control_plane_work
from tests.e2e.support import DEPLOY, client_for, condition, eventually, kubectl

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
AGENT_USER = f"system:karmada:agent:{CLUSTER}"
AGENT_SUBJECT = Subject(AGENT_USER, ("system:karmada:agents",))
LIFETIME = timedelta(seconds=6)
ROTATIONS = 3


def _configmap(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"v": value},
    }


def _secret_certificate(secret: dict[str, Any]) -> bytes:
    text = base64.b64decode(secret["data"]["karmada-kubeconfig"]).decode()
    cert = client_certificate_of(yaml.safe_load(text))
    assert cert is not None
    return cert


@pytest.mark.timeout(60)
async def test_agent_keeps_syncing_across_rotations(tmp_path: Path) -> None:
    knobs = Knobs(csr_max_duration=LIFETIME, csr_backdate=timedelta(0))
    async with (
        run_emulator(profile="karmada", name="karmada", knobs=knobs) as cp,
        run_emulator(profile="member", name=CLUSTER) as member,
    ):
        cp_admin = cp.write_kubeconfig(tmp_path / "cp-admin")
        member_admin = member.write_kubeconfig(tmp_path / "member-admin")
        for target, tree in ((cp_admin, "control-plane"), (member_admin, "base")):
            rendered = await kubectl(None, "kustomize", str(DEPLOY / tree))
            await kubectl(target, "apply", "--server-side", "-f", "-", stdin=rendered)

        admin = await client_for(cp_admin)
        member_client = await client_for(member_admin)
        first_cert, first_key = cp.issue_client_cert(
            AGENT_USER, list(AGENT_SUBJECT.organizations), lifetime=LIFETIME
        )
        kubeconfig = build_kubeconfig(
            cp.url,
            cp.ca_pem,
            cluster="karmada-apiserver",
            user=CLUSTER,
            client_cert_pem=first_cert,
            client_key_pem=first_key,
        )
        agent_kubeconfig = write_kubeconfig(tmp_path / "karmada-agent", kubeconfig)
        await member_client.create(
            SECRETS,
            kubeconfig_secret("karmada-system", dump_kubeconfig(kubeconfig)),
            namespace="karmada-system",
        )
        options = parse_options(
            [
                f"--karmada-kubeconfig={agent_kubeconfig}",
                f"--kubeconfig={member_admin}",
                f"--cluster-name={CLUSTER}",
                "--cluster-status-update-frequency=1s",
                "--cluster-lease-duration=4s",
                "--cert-rotation-checking-interval=250ms",
                "--cert-rotation-remaining-time-threshold=0.5",
                "--metrics-bind-address=0",
                "--health-probe-bind-address=0",
            ]
        )
        agent = Agent(options, stop_event=asyncio.Event(), install_signal_handlers=False)
        task = asyncio.create_task(agent.run())
        try:
            await _exercise(agent, task, cp, admin, member_client, first_cert, first_key)
        finally:
            agent.stop_event.set()
            code = await asyncio.wait_for(task, 30)
            for client in (admin, member_client):
                await client.close()
        assert code == 0


async def _exercise(
    agent: Agent,
    task: asyncio.Task[int],
    cp: Any,
    admin: KubeClient,
    member_client: KubeClient,
    first_cert: bytes,
    first_key: bytes,
) -> None:
    def alive() -> None:
        assert not task.done(), f"agent exited with {task.result()}"

    async def cluster_ready() -> bool:
        alive()
        try:
            cluster = await admin.get(CLUSTERS, CLUSTER)
        except NotFoundError:
            return False
        ready = condition(cluster, "Ready")
        return bool(ready and ready["status"] == "True")

    await eventually(cluster_ready, timeout=15, what="Cluster Ready")
    await asyncio.wait_for(agent.leading.wait(), 10)
    assert agent.manager is not None
    rotation = next(r for r in agent.manager.running if r.name == "certRotation")
    assert isinstance(rotation, CertRotation)
    assert rotation.running
    work_lists = cp.accounting.counts(verb="list", resource="works", user=AGENT_USER)
    work_watches = cp.accounting.watches_opened(resource="works", user=AGENT_USER)

    async def member_value(name: str) -> str | None:
        try:
            live = await member_client.get(CONFIGMAPS, name, namespace="default")
        except NotFoundError:
            return None
        return str(live["data"]["v"])

    async def reaches(name: str, value: str | None) -> None:
        async def check() -> bool:
            alive()
            return await member_value(name) == value if value else await member_value(name) is None

        await eventually(check, timeout=10, what=f"ConfigMap {name} = {value}")

    secret_serials: dict[int, bytes] = {serial_number(first_cert): first_cert}
    deleted: list[str] = []
    deadline = time.monotonic() + 30
    i = 0
    while rotation.rotations < ROTATIONS or len(secret_serials) < ROTATIONS + 1:
        assert time.monotonic() < deadline, f"only {rotation.rotations} rotations"
        name = f"cm-{i}"
        await admin.create(
            WORKS, control_plane_work(CLUSTER, name, [_configmap(name, "1")]), namespace=ES
        )
        await reaches(name, "1")
        if i >= 1:
            previous = f"cm-{i - 1}"
            work = await admin.get(WORKS, previous, namespace=ES)
            work["spec"]["workload"]["manifests"][0]["data"]["v"] = "2"
            await admin.replace(WORKS, work, namespace=ES)
            await reaches(previous, "2")
        if i >= 2:
            older = f"cm-{i - 2}"
            await admin.delete(WORKS, older, namespace=ES)
            await reaches(older, None)
            deleted.append(older)
        assert await cluster_ready(), "the Cluster left Ready during rotations"
        secret = await member_client.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
        cert = _secret_certificate(secret)
        secret_serials.setdefault(serial_number(cert), cert)
        i += 1

    # Same process all along; each certificate in the Secret is new, for the same identity.
    alive()
    assert len(secret_serials) >= ROTATIONS + 1
    assert all(subject_of(cert) == AGENT_SUBJECT for cert in secret_serials.values())
    assert len(deleted) >= 1

    # The Secret and the running agent end up on the same certificate.
    async def secret_matches_memory() -> bool:
        secret = await member_client.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
        in_use = agent.karmada.transport.config.client_cert_pem if agent.karmada else None
        return _secret_certificate(secret) == in_use

    await eventually(secret_matches_memory, timeout=5, what="the Secret to hold the cert in use")

    # The first certificate has expired: the agent lives on the rotated ones; the server
    # answers 401, as kube-apiserver does for an expired client certificate.
    assert agent.karmada is not None
    in_use_config = agent.karmada.transport.config
    first = KubeClient(Transport(in_use_config.with_client_certificate(first_cert, first_key)))
    try:
        with pytest.raises(UnauthorizedError):
            await first.get(CLUSTERS, CLUSTER)
    finally:
        await first.close()
    assert rotation.ctx.karmada.transport.config is in_use_config

    # The heartbeat keeps renewing on the new certificates.
    lease = await admin.get(LEASES, CLUSTER, namespace="karmada-cluster")

    async def renewed() -> bool:
        alive()
        now = await admin.get(LEASES, CLUSTER, namespace="karmada-cluster")
        return bool(now["spec"]["renewTime"] != lease["spec"]["renewTime"])

    await eventually(renewed, timeout=5, what="the Lease to be renewed")

    # Work watches were cut at each switch and resumed from their resourceVersion: no relist.
    assert cp.accounting.counts(verb="list", resource="works", user=AGENT_USER) == work_lists

    # (One shared Works watch: the resume after the last switch may still be in its delay.)
    async def works_watches_resumed() -> bool:
        opened = cp.accounting.watches_opened(resource="works", user=AGENT_USER)
        return opened >= work_watches + 3

    await eventually(
        works_watches_resumed, timeout=10, what="a resumed Works watch after each switch"
    )
    assert cp.accounting.counts(verb="list", resource="works", user=AGENT_USER) == work_lists
    # deploy/ grants watch on CSRs: every rotation waited on a watch, not by polling with GET.
    csr_watches = cp.accounting.watches_opened(
        resource="certificatesigningrequests", user=AGENT_USER
    )
    assert csr_watches >= rotation.rotations

    # The rotation CSRs: named after the kubeconfig user, approved by Karmada's "self" rule.
    csrs = [
        c
        for c in (await admin.list(CERTIFICATE_SIGNING_REQUESTS))["items"]
        if c["spec"].get("username") == AGENT_USER
    ]
    assert len(csrs) >= rotation.rotations
    for csr in csrs:
        assert csr["metadata"]["name"].startswith(f"{CLUSTER}-")
        assert csr["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client"
        assert csr["spec"]["expirationSeconds"] == 600  # six seconds, raised to the API minimum
        approved = condition(csr, "Approved")
        assert approved is not None
        assert approved["reason"] == "AutoApproved"

    # Metrics: rotations counted, expiry of the certificate in use exported.
    registry = agent.registry
    success = registry.get_sample_value(
        "karmada_agent_client_certificate_rotations_total",
        {"member_cluster": CLUSTER, "result": "success"},
    )
    assert success is not None
    assert success >= ROTATIONS
    in_use = agent.karmada.transport.config.client_cert_pem if agent.karmada else None
    assert in_use is not None
    expiry = registry.get_sample_value(
        "karmada_agent_client_certificate_expiration_seconds", {"member_cluster": CLUSTER}
    )
    assert expiry is not None
    assert abs(expiry - certificate_lifetime(in_use).not_after.timestamp()) <= LIFETIME.seconds
