"""karmada-bootstrap token/register/unregister against an emulated control plane and member.

Negative tests assert that nothing was written on either side: the emulators' request accounting
(writes by anyone but the emulators' own controllers) and listings of the objects register makes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID

from agent import resources
from agent.kube.client import KubeClient
from agent.kube.errors import ForbiddenError
from agent.kube.resources import CERTIFICATE_SIGNING_REQUESTS, SECRETS
from agent.kube.transport import Transport
from agent.options import parse_options
from bootstrap import csr, discovery, tokens, waiting
from bootstrap.cli import main_async
from bootstrap.kubeconfig import (
    bootstrap_client_config,
    load_inline_config,
    open_client,
    server_url,
)
from emulator.emulator import Emulator, run_emulator
from emulator.pki import CertificateAuthority
from emulator.wire import SYSTEM_ADMIN
from tests import polling

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
CLUSTER = "member1"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CLUSTERS = "/apis/cluster.karmada.io/v1alpha1/clusters"
WORKS = "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-member1/works"

Obj = dict[str, Any]


def writes(emu: Emulator) -> int:
    """Write requests by anyone except the emulator's own controllers."""
    return sum(
        row["count"]
        for verb in WRITE_VERBS
        for row in emu.accounting.rows(verb=verb)
        if row["user"] != SYSTEM_ADMIN.name
        # Access reviews are "create"s that store nothing.
        and not str(row.get("resource", "")).endswith("accessreviews")
    )


async def get(emu: Emulator, path: str) -> Obj | None:
    async with emu.client() as client:
        response = await client.get(path)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    data: Obj = response.json()
    return data


async def names(emu: Emulator, path: str) -> list[str]:
    listed = await get(emu, path)
    return [item["metadata"]["name"] for item in (listed or {}).get("items", [])]


async def wait_for(check: Any, timeout: float = 15.0) -> Any:
    return await polling.eventually(check, timeout=timeout, interval=0.05)


@dataclass
class Bed:
    cp: Emulator
    member: Emulator
    cp_kubeconfig: Path
    member_kubeconfig: Path
    tmp: Path

    async def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        code = await main_async(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    def baseline(self) -> tuple[int, int]:
        return writes(self.cp), writes(self.member)

    async def assert_nothing_registered(self, baseline: tuple[int, int]) -> None:
        assert (writes(self.cp), writes(self.member)) == baseline
        assert await names(self.cp, CSRS) == []
        assert await get(self.cp, f"{CLUSTERS}/{CLUSTER}") is None
        roles = await names(self.cp, "/apis/rbac.authorization.k8s.io/v1/clusterroles")
        assert not [r for r in roles if CLUSTER in r]
        assert await get(self.member, "/api/v1/namespaces/karmada-system") is None
        assert await names(self.member, "/apis/apps/v1/deployments") == []


@pytest.fixture
async def bed(tmp_path: Path) -> AsyncIterator[Bed]:
    async with (
        run_emulator(profile="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member,
    ):
        yield Bed(
            cp,
            member,
            cp.write_kubeconfig(tmp_path / "karmada.kubeconfig"),
            member.write_kubeconfig(tmp_path / "member.kubeconfig"),
            tmp_path,
        )


async def create_token(bed: Bed, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    code, out, err = await bed.cli(
        capsys,
        "token",
        "create",
        f"--kubeconfig={bed.cp_kubeconfig}",
        "--print-register-command",
        *extra,
    )
    assert code == 0, err
    argv = out.split()
    assert argv[:3] == ["karmada-bootstrap", "register", bed.cp.url.removeprefix("https://")]
    assert argv[3] == "--token"
    assert tokens.TOKEN_PATTERN.match(argv[4])
    assert argv[5:7] == ["--discovery-token-ca-cert-hash", discovery.spki_pin(bed.cp.ca_pem)]
    return argv[1:]


def agent_user(cluster: str = CLUSTER) -> str:
    return f"system:karmada:agent:{cluster}"


async def secret_kubeconfig(bed: Bed) -> Obj:
    secret = await get(bed.member, "/api/v1/namespaces/karmada-system/secrets/karmada-kubeconfig")
    assert secret is not None
    assert set(secret["data"]) == {"karmada-kubeconfig"}
    config: Obj = yaml.safe_load(base64.b64decode(secret["data"]["karmada-kubeconfig"]))
    return config


def check_agent_kubeconfig(bed: Bed, config: Obj) -> None:
    [cluster] = config["clusters"]
    assert cluster["name"] == "karmada-apiserver"
    assert cluster["cluster"]["server"] == bed.cp.url
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == bed.cp.ca_pem
    [user] = config["users"]
    assert user["name"] == CLUSTER
    assert config["current-context"] == f"{CLUSTER}@karmada-apiserver"
    cert = x509.load_pem_x509_certificate(base64.b64decode(user["user"]["client-certificate-data"]))
    subject = cert.subject
    assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == agent_user()
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:karmada:agents"
    ]
    ca = x509.load_pem_x509_certificate(bed.cp.ca_pem)
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert lifetime > timedelta(days=1)


async def agent_client(bed: Bed) -> KubeClient:
    config = await load_inline_config(await secret_kubeconfig(bed))
    return KubeClient(Transport(config))


# --- the whole join -------------------------------------------------------------------------


def _deployment_options(deployment: Obj, karmada_kubeconfig: Path, member_kubeconfig: Path) -> Any:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[0] == "/bin/karmada-agent"
    options = parse_options(command[1:])
    # Only what a pod provides differently: the mounted Secret's path, the in-cluster member
    # credentials (here: the ServiceAccount's identity), and free local ports.
    assert options.karmada_kubeconfig == "/etc/kubeconfig/karmada-kubeconfig"
    return replace(
        options,
        karmada_kubeconfig=str(karmada_kubeconfig),
        kubeconfig=str(member_kubeconfig),
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
    )


async def test_join_from_zero_then_unregister(bed: Bed, capsys: pytest.CaptureFixture[str]) -> None:
    from agent.app import run as run_agent

    register_argv = await create_token(bed, capsys)
    register_argv += [f"--kubeconfig={bed.member_kubeconfig}", "--discovery-timeout=30s"]
    registration = asyncio.create_task(main_async(register_argv))

    async def deployment() -> Obj | None:
        return await get(
            bed.member, "/apis/apps/v1/namespaces/karmada-system/deployments/karmada-agent"
        )

    deploy = await wait_for(deployment)
    config = await secret_kubeconfig(bed)
    check_agent_kubeconfig(bed, config)
    [container] = deploy["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert f"--cluster-name={CLUSTER}" in command
    assert f"--cluster-api-endpoint={bed.member.url}" in command
    assert "--controllers=*" in command
    assert "--leader-elect-resource-namespace=karmada-system" in command
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == "karmada-agent-sa"
    volumes = deploy["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "kubeconfig",
        "secret": {"secretName": "karmada-kubeconfig", "defaultMode": 0o440},
    } in volumes

    # The agent, started from exactly what register wrote, under the ServiceAccount's RBAC.
    mounted = bed.tmp / "karmada-kubeconfig"
    csr.write_private(mounted, yaml.safe_dump(config).encode())
    sa_kubeconfig = bed.member.write_kubeconfig(
        bed.tmp / "sa.kubeconfig",
        user="system:serviceaccount:karmada-system:karmada-agent-sa",
        groups=["system:serviceaccounts", "system:serviceaccounts:karmada-system"],
    )
    options = _deployment_options(deploy, mounted, sa_kubeconfig)
    stop = asyncio.Event()
    agent = asyncio.create_task(run_agent(options, stop_event=stop, install_signal_handlers=False))
    try:
        assert await asyncio.wait_for(registration, 30) == 0
        out = capsys.readouterr().out
        assert f"cluster({CLUSTER}) is joined successfully" in out
        cluster = await get(bed.cp, f"{CLUSTERS}/{CLUSTER}")
        assert cluster is not None
        assert cluster["spec"]["syncMode"] == "Pull"

        work = {
            "apiVersion": "work.karmada.io/v1alpha1",
            "kind": "Work",
            # As karmada-controller-manager creates Works: with the agent's finalizer.
            "metadata": {
                "name": "hello",
                "namespace": "karmada-es-member1",
                "finalizers": ["karmada.io/execution-controller"],
            },
            "spec": {
                "workload": {
                    "manifests": [
                        {
                            "apiVersion": "v1",
                            "kind": "ConfigMap",
                            "metadata": {"name": "hello", "namespace": "default"},
                            "data": {"greeting": "hi"},
                        }
                    ]
                }
            },
        }
        async with bed.cp.client() as client:
            (await client.post(WORKS, json=work)).raise_for_status()
        applied = await wait_for(
            lambda: get(bed.member, "/api/v1/namespaces/default/configmaps/hello")
        )
        assert applied["data"] == {"greeting": "hi"}

        # unregister with the agent's own credentials, while the agent still runs (it removes
        # the Work's finalizer after deleting the ConfigMap).
        code, out, err = await bed.cli(
            capsys,
            "unregister",
            CLUSTER,
            f"--cluster-kubeconfig={bed.member_kubeconfig}",
            "--wait=20s",
        )
        assert code == 0, err
        assert f"cluster({CLUSTER}) is unregistered successfully" in out
        assert "must be removed by its administrator" in err
        assert await get(bed.cp, f"{CLUSTERS}/{CLUSTER}") is None

        async def configmap_gone() -> bool:
            return await get(bed.member, "/api/v1/namespaces/default/configmaps/hello") is None

        await wait_for(configmap_gone, 5)
        assert await names(bed.member, "/apis/apps/v1/namespaces/karmada-system/deployments") == []
        assert (
            await get(bed.member, "/api/v1/namespaces/karmada-system/secrets/karmada-kubeconfig")
            is None
        )
    finally:
        stop.set()
        await asyncio.wait_for(agent, 30)


# --- refusals: nothing written anywhere -----------------------------------------------------


async def test_wrong_ca_hash_writes_nothing(bed: Bed, capsys: pytest.CaptureFixture[str]) -> None:
    argv = await create_token(bed, capsys)
    other_ca = CertificateAuthority.generate("someone-else")
    argv[argv.index("--discovery-token-ca-cert-hash") + 1] = discovery.spki_pin(other_ca.cert_pem)
    before = bed.baseline()
    code, _, err = await bed.cli(capsys, *argv, f"--kubeconfig={bed.member_kubeconfig}")
    assert code == 1
    assert "none of the control plane's CA certificates matches" in err
    await bed.assert_nothing_registered(before)


@contextlib.asynccontextmanager
async def tampering_proxy(bed: Bed) -> AsyncIterator[str]:
    """A man in the middle serving cluster-info with its own CA but the real signatures."""
    real = await get(bed.cp, discovery.CLUSTER_INFO_PATH)
    assert real is not None
    attacker = CertificateAuthority.generate("attacker")
    cert_pem, key_pem = attacker.issue("mitm", ips=("127.0.0.1",), usage="server")
    data = dict(real["data"])
    data["kubeconfig"] = data["kubeconfig"].replace(
        base64.b64encode(bed.cp.ca_pem).decode(), base64.b64encode(attacker.cert_pem).decode()
    )
    assert data["kubeconfig"] != real["data"]["kubeconfig"]

    async def cluster_info(_request: web.Request) -> web.Response:
        return web.json_response({"apiVersion": "v1", "kind": "ConfigMap", "data": data})

    app = web.Application()
    app.router.add_get(discovery.CLUSTER_INFO_PATH, cluster_info)
    runner = web.AppRunner(app)
    await runner.setup()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert_file, key_file = bed.tmp / "mitm.crt", bed.tmp / "mitm.key"
    cert_file.write_bytes(cert_pem)
    csr.write_private(key_file, key_pem)
    ctx.load_cert_chain(cert_file, key_file)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_tampered_cluster_info_writes_nothing(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = await create_token(bed, capsys)
    async with tampering_proxy(bed) as mitm:
        argv[1] = mitm
        before = bed.baseline()
        code, _, err = await bed.cli(capsys, *argv, f"--kubeconfig={bed.member_kubeconfig}")
    assert code == 1
    assert "does not match its signature" in err
    await bed.assert_nothing_registered(before)


async def test_expired_token_writes_nothing(bed: Bed, capsys: pytest.CaptureFixture[str]) -> None:
    token = tokens.generate()
    secret = tokens.secret_manifest(
        token, ttl=timedelta(minutes=1), now=datetime.now(UTC) - timedelta(hours=1)
    )
    async with bed.cp.client() as client:
        (
            await client.post("/api/v1/namespaces/kube-system/secrets", json=secret)
        ).raise_for_status()
    before = bed.baseline()
    code, _, err = await bed.cli(
        capsys,
        "register",
        bed.cp.url.removeprefix("https://"),
        f"--token={token}",
        f"--discovery-token-ca-cert-hash={discovery.spki_pin(bed.cp.ca_pem)}",
        f"--kubeconfig={bed.member_kubeconfig}",
        "--discovery-timeout=1s",
    )
    assert code == 1
    assert f"no signature for token id {token.id!r}" in err
    assert token.secret not in err
    await bed.assert_nothing_registered(before)


async def test_token_without_authentication_usage_writes_nothing(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await bed.cli(
        capsys,
        "token",
        "create",
        f"--kubeconfig={bed.cp_kubeconfig}",
        "--print-register-command",
        "--usages=signing",
    )
    assert code == 0
    assert "lacks the 'authentication' usage" in err
    argv = out.split()[1:]
    before = bed.baseline()
    code, _, err = await bed.cli(capsys, *argv, f"--kubeconfig={bed.member_kubeconfig}")
    assert code == 1
    assert "rejected the bootstrap token" in err
    await bed.assert_nothing_registered(before)


def _request(cn: str, *, dns: str = "") -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:karmada:agents"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False
        )
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


async def test_csrs_outside_karmadas_rules_are_never_approved(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = await create_token(bed, capsys)
    token = tokens.parse(argv[argv.index("--token") + 1])
    before_member = writes(bed.member)
    bad = {
        "other-cn": csr.csr_object(
            "other-cn", _request("system:node:worker-1"), expiration_seconds=3600
        ),
        "extra-san": csr.csr_object(
            "extra-san", _request(agent_user(), dns="evil.example.com"), expiration_seconds=3600
        ),
        "other-signer": csr.csr_object(
            "other-signer", _request(agent_user()), expiration_seconds=3600
        ),
    }
    bad["other-signer"]["spec"]["signerName"] = "kubernetes.io/kube-apiserver-client-kubelet"
    bad["other-signer"]["spec"]["usages"] = ["digital signature", "client auth"]
    sentinel = csr.csr_object("sentinel", _request(agent_user()), expiration_seconds=3600)
    config = bootstrap_client_config(server_url(bed.cp.url), bed.cp.ca_pem, token)
    async with open_client(config) as client:
        for obj in [*bad.values(), sentinel]:
            await client.create(CERTIFICATE_SIGNING_REQUESTS, obj)
        # The approver works through CSRs in order: once the sentinel is signed, it has looked at
        # (and left alone) the others.
        await csr.wait_for_certificate(client, "sentinel", timeout=10)
        for name in bad:
            got = await client.get(CERTIFICATE_SIGNING_REQUESTS, name)
            assert not (got.get("status") or {}).get("conditions"), name
            assert not (got.get("status") or {}).get("certificate"), name
    user = f"system:bootstrap:{token.id}"
    assert (
        bed.cp.accounting.counts(verb="create", resource="certificatesigningrequests", user=user)
        == 4
    )
    assert writes(bed.member) == before_member
    assert await get(bed.cp, f"{CLUSTERS}/{CLUSTER}") is None


async def test_agent_identity_is_confined_to_its_cluster(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = await create_token(bed, capsys)
    code, out, err = await bed.cli(
        capsys, *argv, f"--kubeconfig={bed.member_kubeconfig}", "--wait-for-ready=false"
    )
    assert code == 0, err
    assert "joined successfully" in out
    async with contextlib.AsyncExitStack() as stack:
        client = await agent_client(bed)
        stack.push_async_callback(client.close)
        assert (await client.list(resources.WORKS, namespace="karmada-es-member1"))["items"] == []
        for call in (
            client.list(resources.WORKS, namespace="karmada-es-member2"),
            client.get(SECRETS, "member2", namespace="karmada-cluster"),
            client.list(SECRETS, namespace="karmada-cluster"),
            client.list(SECRETS, namespace="kube-system"),
        ):
            with pytest.raises(ForbiddenError) as caught:
                await call
            status = caught.value.status
            assert (status["kind"], status["code"], status["reason"]) == (
                "Status",
                403,
                "Forbidden",
            )
            assert agent_user() in status["message"]

    # A second run refuses, naming what exists, and writes nothing.
    before = bed.baseline()
    code, _, err = await bed.cli(capsys, *argv, f"--kubeconfig={bed.member_kubeconfig}")
    assert code == 1
    assert "Secret karmada-system/karmada-kubeconfig" in err
    assert "Deployment karmada-system/karmada-agent" in err
    assert bed.baseline() == before


async def test_precreated_rbac_needs_no_rbac_generator(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    async with bed.cp.client() as client:
        response = await client.delete(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:karmada:agent-rbac-generator"
        )
        response.raise_for_status()
    argv = await create_token(bed, capsys, f"--for-cluster={CLUSTER}")
    assert argv[-2:] == ["--cluster-name", CLUSTER]
    code, _out, err = await bed.cli(
        capsys,
        *argv,
        f"--kubeconfig={bed.member_kubeconfig}",
        "--wait-for-ready=false",
        "--control-plane-rbac=pre-created",
    )
    assert code == 0, err
    assert "already in place (pre-created)" in err
    csr_names = await names(bed.cp, CSRS)
    assert len(csr_names) == 1
    assert csr_names[0].startswith(f"{CLUSTER}-")
    check_agent_kubeconfig(bed, await secret_kubeconfig(bed))


async def test_missing_prerequisites_are_reported_then_ensured(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    async with bed.cp.client() as client:
        for path in (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public/rolebindings/system:karmada:bootstrap-signer-clusterinfo",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:karmada:agent-autoapprove-bootstrap",
        ):
            (await client.delete(path)).raise_for_status()
    code, _, err = await bed.cli(capsys, "token", "create", f"--kubeconfig={bed.cp_kubeconfig}")
    assert code == 0
    assert "anonymous users cannot read kube-public/cluster-info" in err
    assert "auto-approve the bootstrap token's agent CSRs" in err
    assert "--ensure-prerequisites" in err
    code, _, err = await bed.cli(
        capsys, "token", "create", f"--kubeconfig={bed.cp_kubeconfig}", "--ensure-prerequisites"
    )
    assert code == 0
    assert "WARNING" not in err
    assert "created RoleBinding kube-public/system:karmada:bootstrap-signer-clusterinfo" in err


async def test_dry_run_prints_everything_and_contacts_nobody(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = await create_token(bed, capsys)
    before_cp = bed.cp.accounting.total()
    before = bed.baseline()
    code, out, err = await bed.cli(
        capsys, *argv, f"--kubeconfig={bed.member_kubeconfig}", "--dry-run"
    )
    assert code == 0, err
    printed = [doc for doc in yaml.safe_load_all(out) if doc]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in printed}
    for expected in (
        ("CertificateSigningRequest", f"{CLUSTER}-<random>"),
        ("ClusterRole", f"system:karmada:{CLUSTER}:agent"),
        ("Role", f"system:karmada:{CLUSTER}:agent-work"),
        ("Namespace", "karmada-system"),
        ("Secret", "karmada-kubeconfig"),
        ("ServiceAccount", "karmada-agent-sa"),
        ("Deployment", "karmada-agent"),
    ):
        assert expected in kinds
    assert bed.cp.accounting.total() == before_cp
    await bed.assert_nothing_registered(before)


async def test_token_list_hides_secrets_and_delete_removes(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = await bed.cli(
        capsys, "token", "create", f"--kubeconfig={bed.cp_kubeconfig}", "--description=edge"
    )
    assert code == 0
    token = tokens.parse(out.strip())
    code, out, _ = await bed.cli(capsys, "token", "list", f"--kubeconfig={bed.cp_kubeconfig}")
    assert code == 0
    assert token.id in out
    assert token.secret not in out
    assert "edge" in out
    assert "authentication,signing" in out
    row = next(line.split() for line in out.splitlines() if line.startswith(token.id))
    assert row[1] == "23h"  # the default TTL of 24 hours, read back from the expiration
    code, out, _ = await bed.cli(
        capsys, "token", "delete", str(token), f"--kubeconfig={bed.cp_kubeconfig}"
    )
    assert code == 0
    assert await get(bed.cp, f"/api/v1/namespaces/kube-system/secrets/{token.secret_name}") is None


async def test_register_says_what_it_waits_for(
    bed: Bed, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown token leaves discovery waiting for its signature: register says so at every
    progress interval (10 s; a fraction of a second here) instead of waiting without a word."""
    monkeypatch.setattr(waiting, "PROGRESS_EVERY", 0.3)
    token = tokens.generate()  # never stored on the control plane: unknown
    code, _, err = await bed.cli(
        capsys,
        "register",
        bed.cp.url.removeprefix("https://"),
        f"--token={token}",
        f"--discovery-token-ca-cert-hash={discovery.spki_pin(bed.cp.ca_pem)}",
        f"--kubeconfig={bed.member_kubeconfig}",
        "--discovery-timeout=2s",
    )
    assert code == 1
    lines = [line for line in err.splitlines() if "still waiting for" in line]
    assert len(lines) >= 3
    assert all(
        line.startswith("[register] still waiting for cluster-info signed") for line in lines
    )
    assert f"no signature for token id {token.id!r}" in lines[-1]
    assert "of 2s)" in lines[-1]
    assert token.secret not in err


async def test_register_says_at_once_why_it_waits_and_for_how_long(
    bed: Bed, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first read that finds no signature for the token says so right away, with how long
    register will keep trying, not only at the next progress interval (10 s): the user learns
    at once that the token may be unknown."""
    monkeypatch.setattr(waiting, "PROGRESS_EVERY", 3600.0)  # no periodic line within the test
    token = tokens.generate()  # never stored on the control plane: unknown
    code, _, err = await bed.cli(
        capsys,
        "register",
        bed.cp.url.removeprefix("https://"),
        f"--token={token}",
        f"--discovery-token-ca-cert-hash={discovery.spki_pin(bed.cp.ca_pem)}",
        f"--kubeconfig={bed.member_kubeconfig}",
        "--discovery-timeout=3s",
    )
    assert code == 1
    said = [line for line in err.splitlines() if "waiting for cluster-info signed" in line]
    assert len(said) == 1, err  # once, however many times discovery read cluster-info
    assert f"no signature for token id {token.id!r}" in said[0]
    assert "the token is unknown, expired" in said[0]
    left = re.search(r"will keep trying for (\d+)s more \(of 3s\)", said[0])
    assert left is not None, said[0]
    assert 2 <= int(left.group(1)) <= 3
    assert "still waiting" not in err
    assert token.secret not in err
