"""agent.cert_validity reads notBefore/notAfter from DER as cryptography does, refuses what is
not a certificate, and lets an agent check its certificate without loading cryptography."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from agent.cert_validity import CertificateError, certificate_lifetime, pem_certificates, validity


def certificate(
    not_before: datetime, not_after: datetime, *, rsa_key: bool = False
) -> x509.Certificate:
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if rsa_key
        else ec.generate_private_key(ec.SECP256R1())
    )
    # Long enough that every SEQUENCE takes a two-byte long-form length.
    name = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"group-{i}-" + "x" * 50) for i in range(3)]
        + [x509.NameAttribute(NameOID.COMMON_NAME, "system:karmada:agent:member1")]
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    return builder.sign(key, hashes.SHA256())


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.mark.parametrize(
    ("not_before", "not_after"),
    [
        # UTCTime on both sides (before 2050).
        (datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), datetime(2027, 1, 2, 3, 4, 5, tzinfo=UTC)),
        # GeneralizedTime from 2050 on, and a 19xx UTCTime.
        (datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC), datetime(2051, 6, 1, tzinfo=UTC)),
        # GeneralizedTime on both sides.
        (datetime(2060, 1, 1, tzinfo=UTC), datetime(2126, 1, 1, tzinfo=UTC)),
    ],
)
@pytest.mark.parametrize("rsa_key", [False, True])
def test_validity_matches_cryptography(
    not_before: datetime, not_after: datetime, rsa_key: bool
) -> None:
    cert = certificate(not_before, not_after, rsa_key=rsa_key)
    lifetime = certificate_lifetime(pem(cert))
    assert lifetime.not_before == cert.not_valid_before_utc == not_before
    assert lifetime.not_after == cert.not_valid_after_utc == not_after


def test_a_bundle_is_the_intersection_and_surrounding_text_is_ignored() -> None:
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    early = certificate(t0, t0 + timedelta(days=10))
    late = certificate(t0 + timedelta(days=2), t0 + timedelta(days=30))
    bundle = b"subject=whatever\n" + pem(early) + b"\n# comment\n" + pem(late)
    lifetime = certificate_lifetime(bundle)
    assert (lifetime.not_before, lifetime.not_after) == (
        t0 + timedelta(days=2),
        early.not_valid_after_utc,
    )


def test_version_1_certificates_have_no_version_field() -> None:
    """The [0] version is optional (v1): the serial number comes first."""
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    der = certificate(t0, t0 + timedelta(days=1)).public_bytes(serialization.Encoding.DER)
    # Rebuild the outer SEQUENCE and the TBS without its version element: a structural v1.
    tbs_start = 4  # the outer SEQUENCE's tag and 3-byte length (0x82 ...)
    assert der[:2] == b"\x30\x82"
    assert der[tbs_start : tbs_start + 2] == b"\x30\x82"
    tbs_length = int.from_bytes(der[tbs_start + 2 : tbs_start + 4], "big")
    tbs_body = der[tbs_start + 4 : tbs_start + 4 + tbs_length]
    assert tbs_body[0] == 0xA0  # the version
    without_version = tbs_body[2 + tbs_body[1] :]
    tbs = b"\x30\x82" + len(without_version).to_bytes(2, "big") + without_version
    rest = der[tbs_start + 4 + tbs_length :]
    body = tbs + rest
    v1 = b"\x30\x82" + len(body).to_bytes(2, "big") + body
    lifetime = validity(v1)
    assert (lifetime.not_before, lifetime.not_after) == (t0, t0 + timedelta(days=1))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "no certificate in the PEM data"),
        (b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "no certificate"),
        (b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n", "bad base64"),
        (b"-----BEGIN CERTIFICATE-----\nAgEB\n-----END CERTIFICATE-----\n", "unexpected DER"),
        (b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n", "truncated"),
        (b"-----BEGIN CERTIFICATE-----\nMIIBCg==\n-----END CERTIFICATE-----\n", "truncated"),
    ],
)
def test_what_is_not_a_certificate_is_a_certificate_error(data: bytes, message: str) -> None:
    with pytest.raises(CertificateError, match=message):
        certificate_lifetime(data)


def test_truncated_der_of_a_real_certificate() -> None:
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    der = certificate(t0, t0 + timedelta(days=1)).public_bytes(serialization.Encoding.DER)
    for cut in (1, 5, 40, 120):
        with pytest.raises(CertificateError):
            validity(der[:cut])
    assert pem_certificates(pem(certificate(t0, t0 + timedelta(days=1))))[0][:1] == b"\x30"


def test_checking_a_certificate_does_not_load_cryptography(tmp_path: Path) -> None:
    """Memory: certRotation's every-interval check reads the lifetime with the standard
    library; cryptography (its Rust extension) is loaded only for a rotation."""
    t0 = datetime.now(UTC)
    cert_file = tmp_path / "cert.pem"
    cert_file.write_bytes(pem(certificate(t0, t0 + timedelta(days=1))))
    script = (
        "import sys\n"
        "import agent.app, agent.cli, agent.controllers.cert_rotation\n"
        "from agent.certificates import certificate_lifetime\n"
        f"lifetime = certificate_lifetime(open({str(cert_file)!r}, 'rb').read())\n"
        "assert lifetime.remaining_fraction() > 0.9\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
