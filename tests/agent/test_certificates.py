"""agent.certificates: lifetimes, keys, requests and issued certificates, and waiting for a CSR's
certificate against the emulated control plane (watch, GET fallback, denial, timeout)."""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agent.certificates import (
    CLIENT_USAGES,
    MIN_EXPIRATION_SECONDS,
    SIGNER_KUBE_APISERVER_CLIENT,
    CertificateError,
    CertificateRequestError,
    Lifetime,
    Subject,
    certificate_lifetime,
    certificate_request,
    csr_object,
    expiration_seconds_for,
    issued_certificate,
    new_private_key,
    public_key_matches,
    random_suffix,
    remaining_fraction,
    request_certificate,
    subject_of,
)
from agent.kube.client import KubeClient
from agent.kube.resources import CERTIFICATE_SIGNING_REQUESTS
from emulator.emulator import Emulator, run_emulator
from tests import polling
from tests.agent.controllers.clusterenv import kube_client

T0 = datetime(2030, 1, 1, tzinfo=UTC)


AGENT = Subject("system:karmada:agent:member1", ("system:karmada:agents",))


CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


WAITER = "csr-waiter"


def make_cert(
    not_before: datetime,
    not_after: datetime,
    subject: Subject = AGENT,
    key_pem: bytes | None = None,
) -> bytes:
    key_pem = key_pem or new_private_key()
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject.x509_name())
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def test_remaining_fraction_is_share_of_lifetime_left() -> None:
    cert = make_cert(T0, T0 + timedelta(hours=10))
    assert remaining_fraction(cert, T0) == 1.0
    assert remaining_fraction(cert, T0 + timedelta(hours=8)) == pytest.approx(0.2)
    assert remaining_fraction(cert, T0 + timedelta(hours=9, minutes=30)) == pytest.approx(0.05)
    # Past expiry the fraction goes negative (still "due").
    assert remaining_fraction(cert, T0 + timedelta(hours=11)) == pytest.approx(-0.1)


def test_empty_validity_counts_as_used_up() -> None:
    assert Lifetime(T0, T0).remaining_fraction(T0 - timedelta(days=1)) == 0.0


def test_lifetime_over_a_bundle_is_the_intersection() -> None:
    early = make_cert(T0, T0 + timedelta(days=10))
    late = make_cert(T0 + timedelta(days=2), T0 + timedelta(days=30))
    lifetime = certificate_lifetime(early + late)
    assert lifetime.not_before == T0 + timedelta(days=2)  # latest notBefore
    assert lifetime.not_after == T0 + timedelta(days=10)  # earliest notAfter
    assert lifetime.total == timedelta(days=8)
    assert lifetime.remaining_fraction(T0 + timedelta(days=6)) == pytest.approx(0.5)


def test_expiration_seconds_respects_the_api_minimum() -> None:
    assert expiration_seconds_for(timedelta(days=365)) == 31_536_000
    assert expiration_seconds_for(timedelta(seconds=6)) == MIN_EXPIRATION_SECONDS == 600


def test_unparsable_certificate() -> None:
    with pytest.raises(CertificateError):
        certificate_lifetime(b"not a certificate")
    with pytest.raises(CertificateError):
        certificate_lifetime(b"")


def test_rotation_key_is_ecdsa_p256_and_request_copies_subject() -> None:
    key_pem = new_private_key()
    assert key_pem.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.curve.name == "secp256r1"

    request = x509.load_pem_x509_csr(certificate_request(key_pem, AGENT))
    assert request.is_signature_valid
    assert request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == AGENT.common_name
    orgs = [a.value for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:karmada:agents"]
    assert len(request.extensions) == 0  # no SANs: Karmada's approver refuses them
    assert request.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def test_rsa_key_for_registration() -> None:
    key_pem = new_private_key("rsa", rsa_bits=2048)
    assert key_pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----")


def test_subject_and_key_matching() -> None:
    key_pem = new_private_key()
    cert = make_cert(T0, T0 + timedelta(days=1), key_pem=key_pem)
    assert subject_of(cert) == AGENT
    assert public_key_matches(cert, key_pem)
    assert not public_key_matches(cert, new_private_key())


def test_csr_object_as_upstream_rotation_sends_it() -> None:
    request = certificate_request(new_private_key(), AGENT)
    csr = csr_object("member1-abcde", request, expiration_seconds=3600)
    assert csr["apiVersion"] == "certificates.k8s.io/v1"
    assert csr["kind"] == "CertificateSigningRequest"
    assert csr["metadata"] == {"name": "member1-abcde"}
    assert csr["spec"] == {
        "request": base64.b64encode(request).decode(),
        "signerName": SIGNER_KUBE_APISERVER_CLIENT,
        "usages": ["digital signature", "key encipherment", "client auth"],
        "expirationSeconds": 3600,
    }
    assert list(CLIENT_USAGES) == csr["spec"]["usages"]


def test_random_suffix() -> None:
    names = {random_suffix() for _ in range(50)}
    assert len(names) > 40
    assert all(len(n) == 5 and set(n) <= set("bcdfghjklmnpqrstvwxz2456789") for n in names)


def test_issued_certificate_states() -> None:
    pending: dict[str, Any] = {"metadata": {"name": "x"}, "status": {}}
    assert issued_certificate(pending) is None
    approved = {
        "metadata": {"name": "x"},
        "status": {"conditions": [{"type": "Approved", "status": "True"}]},
    }
    assert issued_certificate(approved) is None
    signed: dict[str, Any] = copy.deepcopy(approved)
    signed["status"]["certificate"] = base64.b64encode(b"PEM").decode()
    assert issued_certificate(signed) == b"PEM"
    denied = {
        "metadata": {"name": "x"},
        "status": {"conditions": [{"type": "Denied", "reason": "Nope", "message": "no"}]},
    }
    with pytest.raises(CertificateRequestError, match="x was denied: Nope no"):
        issued_certificate(denied)
    failed = {"metadata": {"name": "x"}, "status": {"conditions": [{"type": "Failed"}]}}
    with pytest.raises(CertificateRequestError, match="x was failed"):
        issued_certificate(failed)


async def grant(
    emu: Emulator,
    user: str,
    verbs: list[str],
    *,
    resource: str = "certificatesigningrequests",
    role_name: str | None = None,
) -> None:
    """Let `user` use `verbs` on CSRs (or on `resource`, a subresource of them) through a
    ClusterRole `role_name` (default <user>-csrs) and its binding."""
    name = role_name or f"{user}-csrs"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": [resource], "verbs": verbs}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
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
    await grant(emu, WAITER, verbs)
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
