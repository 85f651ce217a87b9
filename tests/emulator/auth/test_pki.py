"""The emulator's CA, CSR signing, SPKI pins and legacy service-account tokens."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import ssl
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from emulator.pki import (
    CertificateAuthority,
    InvalidTokenError,
    ServiceAccountTokenIssuer,
    UnknownUsageError,
    build_csr,
    load_private_key,
    parse_csr,
    spki_sha256_hex,
)

NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.generate("test-ca")


@pytest.fixture(scope="module")
def sa_issuer() -> ServiceAccountTokenIssuer:
    return ServiceAccountTokenIssuer.generate()


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _names(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(oid)]


def _ekus(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_ca_is_a_self_signed_ten_year_ca() -> None:
    ca = CertificateAuthority.generate("kubernetes", now=NOW)
    cert = ca.certificate
    assert cert.subject == cert.issuer
    assert _names(cert, NameOID.COMMON_NAME) == ["kubernetes"]
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical
    assert constraints.value.ca
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert cert.not_valid_before_utc == NOW
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(days=3650)
    cert.verify_directly_issued_by(cert)


def test_ca_round_trips_through_pem(ca: CertificateAuthority) -> None:
    again = CertificateAuthority.from_pem(ca.cert_pem, ca.key_pem)
    assert again.cert_pem == ca.cert_pem
    cert_pem, _ = again.issue("x")
    _cert(cert_pem).verify_directly_issued_by(ca.certificate)


def test_rsa_ca_can_be_generated() -> None:
    ca = CertificateAuthority.generate("rsa-ca", key_type="rsa")
    assert isinstance(ca.certificate.public_key(), rsa.RSAPublicKey)
    assert b"RSA PRIVATE KEY" in ca.key_pem


def test_issue_client_certificate(ca: CertificateAuthority) -> None:
    cert_pem, key_pem = ca.issue(
        "alice", ["team-a", "team-b"], lifetime=timedelta(hours=2), now=NOW
    )
    cert = _cert(cert_pem)
    cert.verify_directly_issued_by(ca.certificate)
    assert _names(cert, NameOID.COMMON_NAME) == ["alice"]
    assert _names(cert, NameOID.ORGANIZATION_NAME) == ["team-a", "team-b"]
    assert _ekus(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.not_valid_before_utc == NOW
    assert cert.not_valid_after_utc == NOW + timedelta(hours=2)
    key = load_private_key(key_pem)
    assert key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def test_issue_server_certificate_with_sans(ca: CertificateAuthority) -> None:
    cert_pem, _ = ca.issue(
        "kube-apiserver",
        dns_names=["localhost", "kubernetes"],
        ips=["127.0.0.1", "::1"],
        usage="server",
    )
    cert = _cert(cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "kubernetes"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "::1"]
    assert _ekus(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_issue_never_outlives_the_ca() -> None:
    ca = CertificateAuthority.generate("short", lifetime=timedelta(days=1), now=NOW)
    cert_pem, _ = ca.issue("x", lifetime=timedelta(days=30), now=NOW)
    assert _cert(cert_pem).not_valid_after_utc == NOW + timedelta(days=1)


async def test_issued_certificates_work_for_mutual_tls(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    """OpenSSL (with strict X.509 checks) accepts the chain both ways."""
    server_cert, server_key = ca.issue(
        "server", dns_names=["localhost"], ips=["127.0.0.1"], usage="server"
    )
    client_cert, client_key = ca.issue("bob", ["devs"])
    for name, data in {
        "ca.crt": ca.cert_pem,
        "s.crt": server_cert,
        "s.key": server_key,
        "c.crt": client_cert,
        "c.key": client_key,
    }.items():
        (tmp_path / name).write_bytes(data)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "s.crt", tmp_path / "s.key")
    server_ctx.load_verify_locations(tmp_path / "ca.crt")
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    server_ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    client_ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    client_ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    client_ctx.load_cert_chain(tmp_path / "c.crt", tmp_path / "c.key")

    seen: list[bytes | None] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        obj = writer.get_extra_info("ssl_object")
        seen.append(obj.getpeercert(binary_form=True))
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    async with server:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost"
        )
        assert await asyncio.wait_for(reader.read(), 5) == b"ok"
        writer.close()
    assert seen
    assert seen[0] == _cert(client_cert).public_bytes(serialization.Encoding.DER)


def test_sign_csr_copies_subject_and_sans(ca: CertificateAuthority) -> None:
    csr_pem, key_pem = build_csr(
        "system:karmada:agent:member1",
        ["system:karmada:agents"],
        dns_names=["member1.example"],
        ips=["10.0.0.1"],
    )
    cert = _cert(
        ca.sign_csr(
            csr_pem,
            usages=["digital signature", "key encipherment", "client auth"],
            lifetime=timedelta(days=365),
            now=NOW,
        )
    )
    cert.verify_directly_issued_by(ca.certificate)
    assert _names(cert, NameOID.COMMON_NAME) == ["system:karmada:agent:member1"]
    assert _names(cert, NameOID.ORGANIZATION_NAME) == ["system:karmada:agents"]
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["member1.example"]
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature
    assert usage.key_encipherment
    assert not usage.key_cert_sign
    assert _ekus(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    key = load_private_key(key_pem)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert cert.public_key() == key.public_key()


def test_sign_csr_lifetime_long_certificates_backdated_at_both_ends(
    ca: CertificateAuthority,
) -> None:
    csr_pem, _ = build_csr("u")
    cert = _cert(
        ca.sign_csr(csr_pem, usages=["client auth"], lifetime=timedelta(days=365), now=NOW)
    )
    assert cert.not_valid_before_utc == NOW - timedelta(minutes=5)
    assert cert.not_valid_after_utc == NOW + timedelta(days=365) - timedelta(minutes=5)


def test_sign_csr_lifetime_short_certificates_keep_their_end(
    ca: CertificateAuthority,
) -> None:
    csr_pem, _ = build_csr("u")
    cert = _cert(
        ca.sign_csr(csr_pem, usages=["client auth"], lifetime=timedelta(minutes=10), now=NOW)
    )
    assert cert.not_valid_before_utc == NOW - timedelta(minutes=5)
    assert cert.not_valid_after_utc == NOW + timedelta(minutes=10)
    exact = _cert(
        ca.sign_csr(
            csr_pem,
            usages=["client auth"],
            lifetime=timedelta(seconds=30),
            backdate=timedelta(0),
            now=NOW,
        )
    )
    assert exact.not_valid_before_utc == NOW
    assert exact.not_valid_after_utc == NOW + timedelta(seconds=30)


def test_sign_csr_is_capped_by_the_ca_and_refuses_after_it() -> None:
    ca = CertificateAuthority.generate("short", lifetime=timedelta(hours=1), now=NOW)
    csr_pem, _ = build_csr("u")
    cert = _cert(ca.sign_csr(csr_pem, usages=["client auth"], lifetime=timedelta(days=9), now=NOW))
    assert cert.not_valid_after_utc == NOW + timedelta(hours=1)
    with pytest.raises(ValueError, match="expired in the past"):
        ca.sign_csr(
            csr_pem,
            usages=["client auth"],
            lifetime=timedelta(days=1),
            now=NOW + timedelta(hours=2),
        )


def test_sign_csr_drops_requested_extensions(ca: CertificateAuthority) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sneaky")]))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert = _cert(
        ca.sign_csr(
            csr.public_bytes(serialization.Encoding.PEM),
            usages=["client auth"],
            lifetime=timedelta(hours=1),
        )
    )
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_sign_csr_rejects_unknown_usage_and_garbage(ca: CertificateAuthority) -> None:
    csr_pem, _ = build_csr("u")
    with pytest.raises(UnknownUsageError, match="frobnicate"):
        ca.sign_csr(csr_pem, usages=["client auth", "frobnicate"], lifetime=timedelta(hours=1))
    with pytest.raises(ValueError, match="unable to parse csr"):
        ca.sign_csr(b"not a csr", usages=["client auth"], lifetime=timedelta(hours=1))


def test_build_csr_with_rsa_key() -> None:
    csr_pem, key_pem = build_csr("u", ["g"], key_type="rsa", rsa_bits=2048)
    csr = x509.load_pem_x509_csr(csr_pem)
    assert csr.is_signature_valid
    assert isinstance(csr.public_key(), rsa.RSAPublicKey)
    assert csr.public_key() == load_private_key(key_pem).public_key()


def _der_items(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """Minimal DER walk: (tag, full TLV bytes, content) of each element in `data`."""
    out = []
    i = 0
    while i < len(data):
        tag = data[i]
        length = data[i + 1]
        header = 2
        if length & 0x80:
            n = length & 0x7F
            length = int.from_bytes(data[i + 2 : i + 2 + n], "big")
            header = 2 + n
        out.append((tag, data[i : i + header + length], data[i + header : i + header + length]))
        i += header + length
    return out


def test_spki_hash_matches_an_independent_der_walk(ca: CertificateAuthority) -> None:
    der = ca.certificate.public_bytes(serialization.Encoding.DER)
    ((_, _, certificate),) = _der_items(der)
    tbs = _der_items(_der_items(certificate)[0][2])
    if tbs[0][0] == 0xA0:  # explicit version
        tbs = tbs[1:]
    # serial, signature, issuer, validity, subject, subjectPublicKeyInfo
    spki = tbs[5][1]
    assert spki_sha256_hex(ca.cert_pem) == hashlib.sha256(spki).hexdigest()
    assert len(spki_sha256_hex(ca.cert_pem)) == 64


def test_spki_hash_matches_kubeadm_openssl_recipe(ca: CertificateAuthority) -> None:
    pub = subprocess.run(
        ["openssl", "x509", "-pubkey", "-noout"],
        input=ca.cert_pem,
        capture_output=True,
        check=True,
    ).stdout
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "der"],
        input=pub,
        capture_output=True,
        check=True,
    ).stdout
    assert spki_sha256_hex(ca.cert_pem) == hashlib.sha256(der).hexdigest()


def _b64json(part: str) -> dict[str, object]:
    decoded = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    assert isinstance(decoded, dict)
    return decoded


def test_legacy_token_has_kube_claims(sa_issuer: ServiceAccountTokenIssuer) -> None:
    token = sa_issuer.issue("kube-system", "default", "uid-1", "default-token-abcde")
    header, claims, _ = token.split(".")
    assert _b64json(header) == {"alg": "RS256", "kid": sa_issuer.key_id}
    assert _b64json(claims) == {
        "iss": "kubernetes/serviceaccount",
        "kubernetes.io/serviceaccount/namespace": "kube-system",
        "kubernetes.io/serviceaccount/secret.name": "default-token-abcde",
        "kubernetes.io/serviceaccount/service-account.name": "default",
        "kubernetes.io/serviceaccount/service-account.uid": "uid-1",
        "sub": "system:serviceaccount:kube-system:default",
    }
    verified = sa_issuer.verify(token)
    assert verified is not None
    assert (verified.namespace, verified.name, verified.uid, verified.secret_name) == (
        "kube-system",
        "default",
        "uid-1",
        "default-token-abcde",
    )
    assert verified.username == "system:serviceaccount:kube-system:default"


def test_legacy_token_key_id_is_hash_of_public_key(sa_issuer: ServiceAccountTokenIssuer) -> None:
    der = serialization.load_pem_public_key(sa_issuer.public_key_pem).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    expected = base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()
    assert sa_issuer.key_id == expected


def test_legacy_token_tampering_is_detected(sa_issuer: ServiceAccountTokenIssuer) -> None:
    token = sa_issuer.issue("ns", "sa", "uid", "sa-token")
    header, claims, signature = token.split(".")
    forged = dict(
        _b64json(claims),
        **{
            "kubernetes.io/serviceaccount/service-account.name": "x",
            "sub": "system:serviceaccount:ns:x",
        },
    )
    forged_part = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    with pytest.raises(InvalidTokenError, match="invalid signature"):
        sa_issuer.verify(f"{header}.{forged_part}.{signature}")
    other = ServiceAccountTokenIssuer.generate()
    with pytest.raises(InvalidTokenError):
        sa_issuer.verify(other.issue("ns", "sa", "uid", "sa-token"))


LEGACY_CLAIMS = {
    "iss": "kubernetes/serviceaccount",
    "kubernetes.io/serviceaccount/namespace": "ns",
    "kubernetes.io/serviceaccount/secret.name": "sa-token",
    "kubernetes.io/serviceaccount/service-account.name": "sa",
    "kubernetes.io/serviceaccount/service-account.uid": "uid",
    "sub": "system:serviceaccount:ns:sa",
}


@pytest.mark.parametrize(
    ("claim", "what"),
    [
        ("sub", "sub"),
        ("kubernetes.io/serviceaccount/namespace", "namespace"),
        ("kubernetes.io/serviceaccount/secret.name", "secretName"),
        ("kubernetes.io/serviceaccount/service-account.name", "serviceAccountName"),
        ("kubernetes.io/serviceaccount/service-account.uid", "serviceAccountUID"),
    ],
)
def test_legacy_token_needs_every_claim(
    sa_issuer: ServiceAccountTokenIssuer, claim: str, what: str
) -> None:
    for missing in ({}, {claim: ""}, {claim: 7}):
        claims = {k: v for k, v in LEGACY_CLAIMS.items() if k != claim} | missing
        with pytest.raises(InvalidTokenError, match=rf"^{what} claim is missing$"):
            sa_issuer.verify(sa_issuer.sign(claims))


def test_legacy_token_subject_must_name_its_service_account(
    sa_issuer: ServiceAccountTokenIssuer,
) -> None:
    claims = LEGACY_CLAIMS | {"sub": "system:serviceaccount:ns:other"}
    with pytest.raises(InvalidTokenError, match=r"^sub claim is invalid$"):
        sa_issuer.verify(sa_issuer.sign(claims))


def test_verify_ignores_tokens_that_are_not_ours(sa_issuer: ServiceAccountTokenIssuer) -> None:
    assert sa_issuer.verify("abcdef.0123456789abcdef") is None
    assert sa_issuer.verify("not-a-jwt") is None
    header = base64.urlsafe_b64encode(b'{"alg":"RS256"}').rstrip(b"=").decode()
    claims = base64.urlsafe_b64encode(b'{"iss":"https://oidc.example"}').rstrip(b"=").decode()
    assert sa_issuer.verify(f"{header}.{claims}.c2ln") is None


def test_issuer_round_trips_through_pem(sa_issuer: ServiceAccountTokenIssuer) -> None:
    again = ServiceAccountTokenIssuer.from_pem(sa_issuer.key_pem)
    assert again.key_id == sa_issuer.key_id
    assert again.verify(sa_issuer.issue("a", "b", "c", "d")) is not None


def test_parse_csr_reports_subject_and_sans() -> None:
    csr_pem, _ = build_csr(
        "system:karmada:agent:m1",
        ["system:karmada:agents", "x"],
        dns_names=["a.example"],
        ips=["10.1.2.3"],
    )
    info = parse_csr(csr_pem)
    assert info.common_name == "system:karmada:agent:m1"
    assert info.organizations == ("system:karmada:agents", "x")
    assert info.dns_names == ("a.example",)
    assert info.ips == ("10.1.2.3",)
    assert info.emails == ()
    assert info.uris == ()
    assert info.signature_valid
    bare = parse_csr(build_csr("u")[0])
    assert (bare.organizations, bare.dns_names, bare.ips) == ((), (), ())


async def test_an_emulator_makes_its_token_key_only_when_a_token_is_signed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An emulator that never signs a service-account token never pays for an RSA key; one that
    does makes one key and checks its tokens with it (and no other emulator's)."""
    from emulator.emulator import run_emulator

    made: list[int] = []
    generate = rsa.generate_private_key

    def counted(public_exponent: int, key_size: int) -> rsa.RSAPrivateKey:
        made.append(key_size)
        return generate(public_exponent=public_exponent, key_size=key_size)

    monkeypatch.setattr(rsa, "generate_private_key", counted)
    async with run_emulator("member") as first, run_emulator("member") as second:
        assert made == []
        token = first.sa_tokens.issue("kube-system", "default", "uid-1", "default-token-x")
        assert made == [2048]
        assert first.sa_tokens.verify(token) is not None
        with pytest.raises(InvalidTokenError):
            second.sa_tokens.verify(token)
        assert made == [2048, 2048]
