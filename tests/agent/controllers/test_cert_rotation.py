"""certRotation: when to rotate and how the kubeconfig is rewritten; the controller against an
emulated control plane (idle with a token; rotation with and without the kubeconfig Secret, after
a conflict, beside another identity's Secret, above the threshold); and end to end, certificates
six seconds long rotated several times in one agent process.

End to end: the control plane signs CSRs for at most six seconds and without backdating, the
agent's only control-plane credential is such a certificate for system:karmada:agent:member1
under the RBAC of deploy/control-plane, and the member holds the kubeconfig Secret that
`register` writes. While the agent rotates again and again, Works are created, updated and
deleted; every change must reach the member (no watch event lost), the Cluster must stay Ready,
the Lease keep renewing, and the Secret must follow each new certificate.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from prometheus_client import CollectorRegistry

from agent.app import Agent
from agent.certificates import (
    Lifetime,
    Subject,
    certificate_lifetime,
    public_key_matches,
    serial_number,
    subject_of,
)
from agent.connections import load_karmada_config
from agent.context import AgentContext
from agent.controllers.cert_rotation import (
    DRAIN_MAX,
    CertRotation,
    KubeconfigError,
    client_certificate_of,
    csr_name_prefix,
    current_user,
    drain_timeout_for,
    replace_client_certificate,
    should_rotate,
)
from agent.controllers.kubeconfig_secret import find_kubeconfig_secret
from agent.events import EventEmitter
from agent.karmada.names import EVENT_SOURCES
from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig, StaticToken, load_kubeconfig, load_kubeconfig_dict
from agent.kube.errors import ForbiddenError, NotFoundError, UnauthorizedError
from agent.kube.resources import (
    CERTIFICATE_SIGNING_REQUESTS,
    CONFIGMAPS,
    LEASES,
    NAMESPACES,
    PODS,
    SECRETS,
)
from agent.kube.transport import Transport
from agent.metrics import AgentMetrics
from agent.options import Options, parse_options
from agent.resources import CLUSTERS, WORKS
from bootstrap.register import kubeconfig_secret
from emulator.controllers import Knobs
from emulator.emulator import Emulator, run_emulator
from emulator.kubeconfig import build_kubeconfig, dump_kubeconfig, write_kubeconfig
from emulator.works import control_plane_work
from tests.agent.test_certificates import CSR_PATH, T0, grant
from tests.e2e.support import DEPLOY, client_for, condition, eventually, kubectl

from .clusterenv import emulator_pair

AGENT_USER = "system:karmada:agent:member1"


AGENT_GROUPS = ("system:karmada:agents",)


CLUSTER = "member1"


ES = f"karmada-es-{CLUSTER}"


AGENT_SUBJECT = Subject(AGENT_USER, ("system:karmada:agents",))


LIFETIME = timedelta(seconds=6)


ROTATIONS = 3


def test_should_rotate_at_or_under_the_threshold() -> None:
    lifetime = Lifetime(T0, T0 + timedelta(seconds=100))
    assert not should_rotate(lifetime, 0.2, T0 + timedelta(seconds=79))
    assert should_rotate(lifetime, 0.2, T0 + timedelta(seconds=80))  # exactly 20% left
    assert should_rotate(lifetime, 0.2, T0 + timedelta(seconds=200))


def test_drain_cuts_old_streams_well_before_expiry() -> None:
    year = Lifetime(T0, T0 + timedelta(days=365))
    assert drain_timeout_for(year, T0 + timedelta(days=292)) == DRAIN_MAX
    short = Lifetime(T0, T0 + timedelta(seconds=6))
    drain = drain_timeout_for(short, T0 + timedelta(seconds=3))
    assert 0 < drain < 3
    assert drain_timeout_for(short, T0 + timedelta(seconds=10)) == 0.0


def _kubeconfig(cert: bytes, key: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "karmada", "cluster": {"server": "https://k:6443"}}],
        "users": [
            {"name": "other", "user": {"token": "t0k3n"}},
            {
                "name": "member1",
                "user": {
                    "client-certificate-data": base64.b64encode(cert).decode(),
                    "client-key-data": base64.b64encode(key).decode(),
                },
            },
        ],
        "contexts": [
            {"name": "ctx-other", "context": {"cluster": "karmada", "user": "other"}},
            {"name": "member1@karmada", "context": {"cluster": "karmada", "user": "member1"}},
        ],
        "current-context": "member1@karmada",
    }


def test_replace_client_certificate_of_the_current_user_only() -> None:
    original = _kubeconfig(b"OLD-CERT", b"OLD-KEY")
    before = copy.deepcopy(original)
    updated = replace_client_certificate(original, b"NEW-CERT", b"NEW-KEY")
    assert original == before  # not mutated
    name, user = current_user(updated)
    assert name == "member1"
    assert base64.b64decode(user["client-certificate-data"]) == b"NEW-CERT"
    assert base64.b64decode(user["client-key-data"]) == b"NEW-KEY"
    assert client_certificate_of(updated) == b"NEW-CERT"
    # Everything else is as it was.
    assert updated["users"][0] == before["users"][0]
    for key in ("clusters", "contexts", "current-context", "apiVersion", "kind"):
        assert updated[key] == before[key]


def test_replace_drops_file_references() -> None:
    kubeconfig = _kubeconfig(b"C", b"K")
    user = kubeconfig["users"][1]["user"]
    user.pop("client-certificate-data")
    user.pop("client-key-data")
    user["client-certificate"] = "/etc/karmada/pki/agent.crt"
    user["client-key"] = "/etc/karmada/pki/agent.key"
    updated = replace_client_certificate(kubeconfig, b"NEW-CERT", b"NEW-KEY")
    new_user = updated["users"][1]["user"]
    assert set(new_user) == {"client-certificate-data", "client-key-data"}


def test_current_user_errors() -> None:
    kubeconfig = _kubeconfig(b"C", b"K")
    with pytest.raises(KubeconfigError, match="no current-context"):
        current_user({**kubeconfig, "current-context": ""})
    with pytest.raises(KubeconfigError, match="no context 'gone'"):
        current_user({**kubeconfig, "current-context": "gone"})
    with pytest.raises(KubeconfigError, match="no user 'member1'"):
        current_user({**kubeconfig, "users": kubeconfig["users"][:1]})
    token_only = {**kubeconfig, "current-context": "ctx-other"}
    assert client_certificate_of(token_only) is None


def test_csr_name_prefix_falls_back_to_the_cluster_name() -> None:
    assert csr_name_prefix("member1", "member1") == "member1"
    assert csr_name_prefix("agent.member1", "member1") == "agent.member1"
    assert csr_name_prefix("system:karmada:agent:member1", "member1") == "member1"
    assert csr_name_prefix("Member1", "member1") == "member1"
    assert csr_name_prefix(None, "member1") == "member1"
    assert csr_name_prefix("x" * 250, "member1") == "member1"


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


@dataclass(frozen=True)
class Layout:
    """Where an install keeps the agent's kubeconfig, and how the agent is told about it."""

    namespace: str = "karmada-system"
    name: str = "karmada-kubeconfig"
    key: str = "karmada-kubeconfig"
    # The agent's own Pod (POD_NAME/POD_NAMESPACE) mounting the Secret, or none.
    pod: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)


REGISTER = Layout()


def helm_chart_pod(release: str, namespace: str) -> dict[str, Any]:
    """The agent's Pod as Karmada's Helm chart (installMode: agent) lays it out."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{release}-7d9f8b-x2x4z", "namespace": namespace},
        "spec": {
            "serviceAccountName": release,
            "containers": [
                {
                    "name": release,
                    "image": "docker.io/karmada/karmada-agent:v1.19.0",
                    "command": [
                        "/bin/karmada-agent",
                        "--karmada-kubeconfig=/etc/kubeconfig/kubeconfig",
                        "--cluster-name=member1",
                    ],
                    "volumeMounts": [{"name": "kubeconfig", "mountPath": "/etc/kubeconfig"}],
                }
            ],
            "volumes": [{"name": "kubeconfig", "secret": {"secretName": f"{release}-kubeconfig"}}],
        },
    }


HELM = Layout(
    namespace="edge-agents",
    name="edge-kubeconfig",
    key="kubeconfig",
    pod=helm_chart_pod("edge", "edge-agents"),
    options={"karmada_kubeconfig": "/etc/kubeconfig/kubeconfig"},
)
FLAGS = Layout(
    namespace="agents",
    name="agent-credentials",
    key="config",
    options={
        "karmada_kubeconfig_namespace": "agents",
        "karmada_kubeconfig_secret": "agent-credentials",
        "karmada_kubeconfig_secret_key": "config",
    },
)


@dataclass
class AgentClock:
    """The controller's idea of now: the wall clock `ahead` of real time."""

    ahead: timedelta = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.ahead


async def _grant_cluster_events(cp: Emulator) -> None:
    """The agent's rules of deploy/control-plane this module needs: read its Cluster, write
    Events."""
    name = "agent-cluster-events"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [
            {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": AGENT_USER}],
    }
    cluster = {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": CLUSTER},
        "spec": {"syncMode": "Pull"},
    }
    async with cp.client() as admin:
        for path, body in (
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
            ("/apis/cluster.karmada.io/v1alpha1/clusters", cluster),
        ):
            response = await admin.post(path, json=body)
            assert response.status_code == 201, response.text


async def _cluster_events(cp: Emulator, reason: str) -> list[dict[str, Any]]:
    async with cp.client() as admin:
        response = await admin.get("/api/v1/namespaces/default/events")
        assert response.status_code == 200, response.text
    return [
        event
        for event in response.json()["items"]
        if event["reason"] == reason and event["involvedObject"]["kind"] == "Cluster"
    ]


@asynccontextmanager
async def _rotation_env(
    tmp: Path,
    *,
    secret: bool,
    member_class: type[KubeClient] = KubeClient,
    layout: Layout = REGISTER,
    lifetime: timedelta = timedelta(seconds=30),
    clock: AgentClock | None = None,
) -> AsyncIterator[tuple[CertRotation, Emulator, KubeClient, bytes]]:
    knobs = Knobs(csr_max_duration=timedelta(seconds=30), csr_backdate=timedelta(0))
    async with (
        run_emulator("karmada", knobs=knobs) as cp,
        run_emulator("member", name="member1") as member,
    ):
        await grant(cp, AGENT_USER, ["create", "get", "watch"])
        await grant(
            cp,
            AGENT_USER,
            ["create"],
            resource="certificatesigningrequests/selfclusteragent",
            role_name="self-csr",
        )
        await _grant_cluster_events(cp)
        cert, key = cp.issue_client_cert(AGENT_USER, AGENT_GROUPS, lifetime=lifetime)
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
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": layout.namespace}},
            )
            body = kubeconfig_secret(layout.namespace, dump_kubeconfig(kubeconfig))
            body["metadata"]["name"] = layout.name
            body["data"] = {layout.key: body["data"].pop("karmada-kubeconfig")}
            await member_client.create(SECRETS, body, namespace=layout.namespace)
        environ: dict[str, str] = {}
        if layout.pod is not None:
            await member_client.create(PODS, layout.pod, namespace=layout.namespace)
            environ = {
                "POD_NAME": layout.pod["metadata"]["name"],
                "POD_NAMESPACE": layout.namespace,
            }
        options = Options(cluster_name="member1", **layout.options)
        events = EventEmitter(karmada, component="karmada-agent", sources=EVENT_SOURCES)
        ctx = AgentContext(
            options=options,
            cluster_name="member1",
            karmada=karmada,
            member=member_client,
            karmada_mapper=cast(Any, None),
            member_mapper=cast(Any, None),
            events=events,
            metrics=AgentMetrics(CollectorRegistry()),
            sources=cast(Any, None),
        )
        # By default 25 of the certificate's 30 seconds gone: under the default threshold (0.2).
        clock = clock or AgentClock(lifetime * 5 / 6)
        try:
            later = CertRotation(
                ctx,
                csr_timeout=10,
                now=clock.now,
                find_secret=lambda: find_kubeconfig_secret(
                    member_client, options, environ=environ, namespace_file=tmp / "no-such-file"
                ),
            )
            yield later, cp, member_client, cert
        finally:
            await later.stop()
            await events.stop()
            await karmada.close()
            await member_client.close()


def _stored_cert(secret: dict[str, Any], key: str = "karmada-kubeconfig") -> bytes | None:
    text = base64.b64decode(secret["data"][key]).decode()
    return client_certificate_of(yaml.safe_load(text))


@pytest.mark.parametrize("layout", [REGISTER, HELM, FLAGS], ids=["register", "helm", "flags"])
async def test_rotation_persists_in_every_install_layout(tmp_path: Path, layout: Layout) -> None:
    """register's karmada-kubeconfig, the Helm chart's <release>-kubeconfig (key kubeconfig, in
    the release's namespace, found through the agent's own Pod) and a Secret named by flags: the
    rotated certificate is written where the agent's kubeconfig comes from."""
    async with _rotation_env(tmp_path, secret=True, layout=layout) as (rotation, _, member, old):
        assert await rotation.check_once()
        secret = await member.get(SECRETS, layout.name, namespace=layout.namespace)
        assert list(secret["data"]) == [layout.key]
        stored = _stored_cert(secret, layout.key)
        assert stored is not None
        assert stored == rotation.ctx.karmada.transport.config.client_cert_pem
        assert serial_number(stored) != serial_number(old)


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


@pytest.mark.timeout(60)
async def test_rotation_while_the_secret_is_away_is_saved_once_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kubeconfig Secret deleted and the rotation due: the new certificate is used at once,
    a warning and a Warning Event on the Cluster say it is not saved. The Secret recreated as it
    was: the new certificate is in it within one retry interval, and once the old certificate
    has expired, a restart (the kubeconfig read from the Secret as the agent reads it) is let
    in."""
    caplog.set_level(logging.INFO, logger="agent.controllers.cert_rotation")
    # Five of the first certificate's six seconds gone, as the controller sees it.
    clock = AgentClock(timedelta(seconds=5))
    async with _rotation_env(tmp_path, secret=True, lifetime=timedelta(seconds=6), clock=clock) as (
        rotation,
        cp,
        member,
        old_cert,
    ):
        original = await member.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
        await member.delete(SECRETS, "karmada-kubeconfig", namespace="karmada-system")

        assert await rotation.check_once()
        new_cert = rotation.ctx.karmada.transport.config.client_cert_pem
        assert new_cert is not None
        assert serial_number(new_cert) != serial_number(old_cert)
        assert "is not saved: no Secret karmada-system/karmada-kubeconfig" in caplog.text
        assert "will be lost at restart" in caplog.text
        unsaved = await eventually(
            lambda: _cluster_events(cp, "RotatedCertificateUnsaved"),
            what="a RotatedCertificateUnsaved Event on the Cluster",
        )
        assert unsaved[0]["type"] == "Warning"
        assert unsaved[0]["involvedObject"]["name"] == CLUSTER
        assert unsaved[0]["involvedObject"]["uid"]

        clock.ahead = timedelta(0)  # no further rotation is due
        rotation.interval = 2.0
        await rotation.start()
        meta = original["metadata"]
        await member.create(
            SECRETS,
            {
                **original,
                "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            },
            namespace="karmada-system",
        )

        async def saved() -> bool:
            secret = await member.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
            return _stored_cert(secret) == new_cert

        await eventually(saved, timeout=rotation.interval + 1.0, what="the new certificate saved")
        assert rotation.rotations == 1
        assert "holds the new certificate (written after it was missing" in caplog.text

        secret = await member.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
        saved_path = tmp_path / "from-secret.kubeconfig"
        saved_path.write_bytes(base64.b64decode(secret["data"]["karmada-kubeconfig"]))
        old_path = tmp_path / "old.kubeconfig"
        old_path.write_bytes(base64.b64decode(original["data"]["karmada-kubeconfig"]))
        restarted = KubeClient(
            Transport(
                await load_karmada_config(
                    Options(cluster_name=CLUSTER, karmada_kubeconfig=str(saved_path))
                )
            )
        )
        before = KubeClient(
            Transport(
                await load_karmada_config(
                    Options(cluster_name=CLUSTER, karmada_kubeconfig=str(old_path))
                )
            )
        )
        try:

            async def old_refused() -> bool:
                try:
                    await before.get(CLUSTERS, CLUSTER)
                except UnauthorizedError:
                    return True
                return False

            await eventually(old_refused, timeout=15, what="the old certificate expired")
            cluster = await restarted.get(CLUSTERS, CLUSTER)
            assert cluster["metadata"]["name"] == CLUSTER
        finally:
            await restarted.close()
            await before.close()


class _ForbiddenUntilRestored(KubeClient):
    """A member client whose Secret writes are refused (403) until `restored`: the agent's RBAC
    on the Secret taken away, then given back."""

    restored = False

    async def replace(self, gvr: Any, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if gvr == SECRETS and not self.restored:
            raise ForbiddenError(
                {
                    "code": 403,
                    "reason": "Forbidden",
                    "message": 'secrets "karmada-kubeconfig" is forbidden',
                }
            )
        return await super().replace(gvr, body, **kwargs)


async def test_rotation_refused_by_rbac_is_saved_once_it_is_restored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.controllers.cert_rotation")
    clock = AgentClock(timedelta(seconds=25))
    async with _rotation_env(
        tmp_path, secret=True, member_class=_ForbiddenUntilRestored, clock=clock
    ) as (rotation, cp, member, old_cert):
        assert isinstance(member, _ForbiddenUntilRestored)
        assert await rotation.check_once()
        new_cert = rotation.ctx.karmada.transport.config.client_cert_pem
        secret = await member.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
        assert _stored_cert(secret) == old_cert
        assert "is forbidden" in caplog.text
        await eventually(
            lambda: _cluster_events(cp, "RotatedCertificateUnsaved"),
            what="a RotatedCertificateUnsaved Event on the Cluster",
        )

        clock.ahead = timedelta(0)
        assert not await rotation.check_once()  # still refused: kept for the next check
        member.restored = True
        assert not await rotation.check_once()  # no new rotation; the unsaved one written
        secret = await member.get(SECRETS, "karmada-kubeconfig", namespace="karmada-system")
        assert _stored_cert(secret) == new_cert
        assert rotation.rotations == 1


@pytest.mark.parametrize(
    ("ahead", "reason", "said"),
    [
        (timedelta(seconds=90), "ClientCertificateExpired", "is expired: it expired at"),
        (timedelta(seconds=-90), "ClientCertificateNotYetValid", "is not yet valid"),
    ],
    ids=["expired", "not-yet-valid"],
)
async def test_a_certificate_outside_its_validity_is_a_warning_event_on_the_cluster(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    ahead: timedelta,
    reason: str,
    said: str,
) -> None:
    """The agent's clock puts the certificate in use outside its validity period while the
    control plane still takes it (its clock differs): a warning and a Warning Event on the
    Cluster naming the certificate and its notAfter, and the expiry metric."""
    caplog.set_level(logging.INFO, logger="agent.controllers.cert_rotation")
    async with _rotation_env(tmp_path, secret=True, clock=AgentClock(ahead)) as (
        rotation,
        cp,
        _member,
        cert,
    ):
        await rotation.check_once()
        not_after = certificate_lifetime(cert).not_after
        events = await eventually(
            lambda: _cluster_events(cp, reason), what=f"a {reason} Event on the Cluster"
        )
        (event,) = events
        assert event["type"] == "Warning"
        assert event["involvedObject"]["name"] == CLUSTER
        assert event["source"]["component"] == "cert-rotation-controller"
        assert said in event["message"]
        assert f"serial {serial_number(cert):x}" in event["message"]
        assert not_after.isoformat() in event["message"]
        assert said in caplog.text
        expiry = rotation.ctx.metrics.registry.get_sample_value(
            "karmada_agent_client_certificate_expiration_seconds", {"member_cluster": "member1"}
        )
        assert expiry is not None


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
