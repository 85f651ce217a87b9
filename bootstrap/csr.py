"""Private keys and x509 certificate requests for agent identities.

The key is generated where it will be used and is never sent anywhere; only the
request (public key plus subject) goes to the control plane.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from agent.kube.client import GVR, KubeClient

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


# --- submitting a CSR and waiting for the certificate ------------------------------------------

CSR_GVR = GVR("certificates.k8s.io", "v1", "certificatesigningrequests")
_NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


class CertificateRequestError(Exception):
    pass


def random_suffix(n: int = 5) -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(n))


def csr_object(
    name: str,
    request_pem: bytes,
    *,
    expiration_seconds: int | None,
    usages: list[str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "request": base64.b64encode(request_pem).decode(),
        "signerName": SIGNER_CLIENT,
        "usages": list(usages or AGENT_USAGES),
    }
    if expiration_seconds:
        spec["expirationSeconds"] = expiration_seconds
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name, "labels": {"karmada.io/system": "true"}},
        "spec": spec,
    }


def _condition(csr: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (csr.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status", "True") == "True":
            return dict(cond)
    return None


async def wait_for_certificate(
    client: KubeClient,
    name: str,
    *,
    timeout: float,
    progress: Callable[[str], None] = lambda _m: None,
    report_every: float = 5.0,
) -> bytes:
    """Poll the CSR until it carries a certificate; explain what to check when it does not."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    next_report = start + report_every
    delay = 0.1
    csr: dict[str, Any] = {}
    while True:
        csr = await client.get(CSR_GVR, name)
        certificate = (csr.get("status") or {}).get("certificate")
        if certificate:
            return base64.b64decode(certificate)
        for kind in ("Denied", "Failed"):
            cond = _condition(csr, kind)
            if cond is not None:
                raise CertificateRequestError(
                    f"CertificateSigningRequest {name} was {kind.lower()}: "
                    f"{cond.get('reason', '')} {cond.get('message', '')}".rstrip()
                )
        now = loop.time()
        if now - start >= timeout:
            break
        if now >= next_report:
            state = "approved, waiting for the signer" if _condition(csr, "Approved") else "pending"
            progress(f"CertificateSigningRequest {name} is {state} ({now - start:.0f}s)")
            next_report = now + report_every
        await asyncio.sleep(min(delay, max(0.0, timeout - (now - start))))
        delay = min(delay * 2, 1.0)
    if _condition(csr, "Approved"):
        hint = (
            "it was approved but never signed: is kube-controller-manager's csrsigning "
            "controller running with the Karmada CA?"
        )
    else:
        hint = (
            "it is still Pending: is karmada-controller-manager (agentcsrapproving) running, and "
            "may the requester create certificatesigningrequests/clusteragent (RBAC "
            "system:karmada:certificatesigningrequest:autoapprover)? An administrator can also "
            f"approve it by hand: kubectl certificate approve {name}"
        )
    raise CertificateRequestError(
        f"no certificate for CertificateSigningRequest {name} after {timeout:g}s; {hint}"
    )


async def request_certificate(
    client: KubeClient,
    name: str,
    key_pem: bytes,
    common_name: str,
    organizations: list[str],
    *,
    expiration_seconds: int | None,
    timeout: float,
    progress: Callable[[str], None] = lambda _m: None,
) -> bytes:
    """Create a CSR for `key_pem` (only its public half leaves) and wait for the certificate."""
    request = certificate_request(key_pem, common_name, organizations)
    await client.create(CSR_GVR, csr_object(name, request, expiration_seconds=expiration_seconds))
    progress(f"created CertificateSigningRequest {name} for {common_name}; waiting for approval")
    return await wait_for_certificate(client, name, timeout=timeout, progress=progress)
