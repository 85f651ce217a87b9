"""agent.certificates and the pure parts of certRotation: lifetime math, requests, kubeconfigs."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime, timedelta
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
    subject_of,
)
from agent.controllers.cert_rotation import (
    DRAIN_MAX,
    KubeconfigError,
    client_certificate_of,
    csr_name_prefix,
    current_user,
    drain_timeout_for,
    replace_client_certificate,
    should_rotate,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
AGENT = Subject("system:karmada:agent:member1", ("system:karmada:agents",))


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


# --- lifetimes ---------------------------------------------------------------------------------


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


def test_expiration_seconds_respects_the_api_minimum() -> None:
    assert expiration_seconds_for(timedelta(days=365)) == 31_536_000
    assert expiration_seconds_for(timedelta(seconds=6)) == MIN_EXPIRATION_SECONDS == 600


def test_unparsable_certificate() -> None:
    with pytest.raises(CertificateError):
        certificate_lifetime(b"not a certificate")
    with pytest.raises(CertificateError):
        certificate_lifetime(b"")


# --- keys and requests -------------------------------------------------------------------------


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


# --- kubeconfig rewriting ----------------------------------------------------------------------


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
