"""Private keys and x509 certificate requests for agent identities.

The key is generated where it will be used and is never sent anywhere; only the
request (public key plus subject) goes to the control plane.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

SIGNER_CLIENT = "kubernetes.io/kube-apiserver-client"
AGENT_USAGES = ["digital signature", "key encipherment", "client auth"]


def new_private_key(kind: str = "ecdsa") -> bytes:
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    if kind == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    else:
        key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8
        if kind == "ecdsa"
        else serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def certificate_request(key_pem: bytes, common_name: str, organizations: list[str]) -> bytes:
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError("unsupported private key type")
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    names.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    request = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names))
    return request.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def certificate_lifetime(cert_pem: bytes) -> tuple[datetime, datetime]:
    """(notBefore, notAfter) over every certificate in the PEM: latest start, earliest end."""
    certs = x509.load_pem_x509_certificates(cert_pem)
    return (
        max(c.not_valid_before_utc for c in certs),
        min(c.not_valid_after_utc for c in certs),
    )


def remaining_fraction(cert_pem: bytes, now: datetime | None = None) -> float:
    not_before, not_after = certificate_lifetime(cert_pem)
    total = (not_after - not_before).total_seconds()
    left = (not_after - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, left / total) if total > 0 else 0.0


def write_private(path: Path, data: bytes) -> None:
    """Write key material readable by the owner only, never briefly world-readable."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)
