"""Client certificates for agent identities: keys, certificate requests, lifetimes, CSRs.

`cryptography` is imported by the functions that need it, not with this module: certRotation
imports it to check lifetimes (agent.cert_validity, standard library only) every interval, and
only a due rotation loads the Rust extension (about 8 MiB of resident memory).

The general home for what both the agent (certificate rotation) and the bootstrap tool
(registration) need. Private keys are generated where they are used and never leave that
process; only the request (public key and subject) goes to the control plane.

Waiting for a CSR's certificate uses a watch on that one CSR (fieldSelector metadata.name). The
RBAC that upstream's `karmadactl register` grants an agent allows only get and create on CSRs,
so when the watch is forbidden the wait falls back to GET requests with a capped backoff.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from agent.cert_validity import CertificateError as CertificateError
from agent.cert_validity import Lifetime as Lifetime
from agent.cert_validity import certificate_lifetime as certificate_lifetime
from agent.kube.backoff import Backoff
from agent.kube.client import KubeClient
from agent.kube.errors import ForbiddenError, GoneError, TransportError, from_status
from agent.kube.resources import CERTIFICATE_SIGNING_REQUESTS
from agent.logs import get_logger

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

log = get_logger(__name__)

JsonDict = dict[str, Any]
KeyKind = Literal["ecdsa", "rsa"]

SIGNER_KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
# What Karmada's agent CSR approver accepts, and what upstream's agent and register request.
CLIENT_USAGES: tuple[str, ...] = ("digital signature", "key encipherment", "client auth")
# kube-apiserver rejects spec.expirationSeconds under ten minutes.
MIN_EXPIRATION_SECONDS = 600
DEFAULT_RSA_BITS = 3072
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.String's alphabet

# Waiting for a certificate: watch each stream for at most this long, back off after errors.
_WATCH_SECONDS = 60
_RETRY_DELAY = 0.2
_POLL_DELAY_MAX = 2.0


class CertificateRequestError(Exception):
    """A CSR that was denied, failed, deleted, or not signed in time."""


# --- keys, subjects, requests ------------------------------------------------------------------


@dataclass(frozen=True)
class Subject:
    """The parts of an x509 subject Kubernetes turns into a user: CN (name), O (groups)."""

    common_name: str
    organizations: tuple[str, ...] = ()

    def x509_name(self) -> x509.Name:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in self.organizations]
        names.append(x509.NameAttribute(NameOID.COMMON_NAME, self.common_name))
        return x509.Name(names)


def new_private_key(kind: KeyKind = "ecdsa", *, rsa_bits: int = DEFAULT_RSA_BITS) -> bytes:
    """A fresh private key, PEM: ECDSA P-256 (SEC1 "EC PRIVATE KEY") or RSA (PKCS#1)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if kind == "rsa":
        rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
        return rsa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    if kind != "ecdsa":
        raise ValueError(f"unknown key kind {kind!r}")
    ec_key = ec.generate_private_key(ec.SECP256R1())
    return ec_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _private_key(key_pem: bytes) -> ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"cannot load the private key: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise CertificateError(f"unsupported private key type {type(key).__name__}")
    return key


def certificate_request(key_pem: bytes, subject: Subject) -> bytes:
    """A PEM CSR for `key_pem` with `subject` and no extensions (no SANs: Karmada's approver
    refuses agent requests that carry any)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    key = _private_key(key_pem)
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject.x509_name())
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def load_certificates(cert_pem: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle, in order; CertificateError when there is none."""
    from cryptography import x509

    try:
        certs = x509.load_pem_x509_certificates(cert_pem)
    except ValueError as exc:
        raise CertificateError(f"cannot parse the certificate: {exc}") from exc
    if not certs:
        raise CertificateError("no certificate in the PEM data")
    return certs


def subject_of(cert_pem: bytes) -> Subject:
    """CN and O of the first (leaf) certificate of a bundle."""
    from cryptography.x509.oid import NameOID

    name = load_certificates(cert_pem)[0].subject
    cns = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = name.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return Subject(
        common_name=str(cns[0].value) if cns else "",
        organizations=tuple(str(o.value) for o in orgs),
    )


def serial_number(cert_pem: bytes) -> int:
    return load_certificates(cert_pem)[0].serial_number


def public_key_matches(cert_pem: bytes, key_pem: bytes) -> bool:
    """True when the leaf certificate certifies the public half of `key_pem`."""
    from cryptography.hazmat.primitives import serialization

    public = load_certificates(cert_pem)[0].public_key()
    fmt = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    return public.public_bytes(enc, fmt) == _private_key(key_pem).public_key().public_bytes(
        enc, fmt
    )


# --- lifetimes ---------------------------------------------------------------------------------


def remaining_fraction(cert_pem: bytes, now: datetime | None = None) -> float:
    return certificate_lifetime(cert_pem).remaining_fraction(now)


def expiration_seconds_for(lifetime: timedelta) -> int:
    """spec.expirationSeconds asking for `lifetime`, raised to the API server's minimum."""
    return max(MIN_EXPIRATION_SECONDS, int(lifetime.total_seconds()))


# --- CertificateSigningRequests ----------------------------------------------------------------


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(length))


def csr_object(
    name: str,
    request_pem: bytes,
    *,
    signer_name: str = SIGNER_KUBE_APISERVER_CLIENT,
    usages: Sequence[str] = CLIENT_USAGES,
    expiration_seconds: int | None = None,
    labels: dict[str, str] | None = None,
) -> JsonDict:
    """A certificates.k8s.io/v1 CertificateSigningRequest for `request_pem`."""
    spec: JsonDict = {
        "request": base64.b64encode(request_pem).decode("ascii"),
        "signerName": signer_name,
        "usages": list(usages),
    }
    if expiration_seconds is not None:
        spec["expirationSeconds"] = expiration_seconds
    metadata: JsonDict = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": metadata,
        "spec": spec,
    }


def csr_condition(csr: JsonDict, kind: str) -> JsonDict | None:
    """The condition of that type when it is true (CSR conditions default to status True)."""
    for cond in (csr.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind and cond.get("status", "True") == "True":
            return dict(cond)
    return None


def issued_certificate(csr: JsonDict) -> bytes | None:
    """The signed certificate (PEM) once issued; raises for a Denied or Failed request."""
    certificate = (csr.get("status") or {}).get("certificate")
    if certificate:
        return base64.b64decode(certificate)
    name = (csr.get("metadata") or {}).get("name", "")
    for kind in ("Denied", "Failed"):
        cond = csr_condition(csr, kind)
        if cond is not None:
            detail = f"{cond.get('reason', '')} {cond.get('message', '')}".strip()
            raise CertificateRequestError(
                f"CertificateSigningRequest {name} was {kind.lower()}"
                + (f": {detail}" if detail else "")
            )
    return None


def _not_issued_hint(name: str, csr: JsonDict | None) -> str:
    if csr is not None and csr_condition(csr, "Approved"):
        return (
            "it was approved but not signed: is kube-controller-manager's csrsigning controller "
            "running with the Karmada CA?"
        )
    return (
        "it is still Pending: is karmada-controller-manager's agentcsrapproving controller "
        "running, and may the requester create certificatesigningrequests/selfclusteragent "
        "(rotation) or certificatesigningrequests/clusteragent (registration)? An administrator "
        f"can approve it by hand: kubectl certificate approve {name}"
    )


class _Waiter:
    def __init__(
        self, client: KubeClient, name: str, progress: Callable[[str], None] | None
    ) -> None:
        self.client = client
        self.name = name
        self.progress = progress
        self.last: JsonDict | None = None
        self.watch_forbidden = False

    def _see(self, csr: JsonDict) -> bytes | None:
        previous = self.last
        self.last = csr
        if (
            self.progress is not None
            and previous is not None
            and csr_condition(csr, "Approved")
            and not csr_condition(previous, "Approved")
        ):
            self.progress(f"CertificateSigningRequest {self.name} approved; waiting for signing")
        return issued_certificate(csr)

    async def run(self, initial: JsonDict | None) -> bytes:
        csr = (
            initial
            if initial is not None
            else await self.client.get(CERTIFICATE_SIGNING_REQUESTS, self.name)
        )
        poll = Backoff(initial=_RETRY_DELAY, cap=_POLL_DELAY_MAX, jitter=0.0)
        while True:
            certificate = self._see(csr)
            if certificate is not None:
                return certificate
            if self.watch_forbidden:
                await asyncio.sleep(poll.next())  # GET fallback: the watch is not permitted
                csr = await self.client.get(CERTIFICATE_SIGNING_REQUESTS, self.name)
                continue
            rv = str((csr.get("metadata") or {}).get("resourceVersion") or "")
            try:
                found = await self._watch(rv)
            except ForbiddenError:
                log.info(
                    "may not watch CertificateSigningRequests; checking %s with GET instead "
                    "(grant watch on certificatesigningrequests to avoid this)",
                    self.name,
                )
                self.watch_forbidden = True
                found = None
            except GoneError:
                found = None
            except TransportError as exc:
                log.info("watch of CertificateSigningRequest %s broke: %s", self.name, exc)
                await asyncio.sleep(_RETRY_DELAY)  # back off before re-reading
                found = None
            if found is not None:
                return found
            csr = await self.client.get(CERTIFICATE_SIGNING_REQUESTS, self.name)

    async def _watch(self, resource_version: str) -> bytes | None:
        """Watch the CSR from `resource_version`; the certificate, or None when the stream ends
        (or reports 410) without one."""
        async with self.client.watch(
            CERTIFICATE_SIGNING_REQUESTS,
            name=self.name,
            resource_version=resource_version or None,
            allow_watch_bookmarks=False,
            timeout_seconds=_WATCH_SECONDS,
        ) as events:
            async for event in events:
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    error = from_status(obj)
                    if isinstance(error, GoneError) or error.code == 410:
                        return None
                    raise error
                if kind == "DELETED":
                    raise CertificateRequestError(
                        f"CertificateSigningRequest {self.name} was deleted before it was signed"
                    )
                if kind in ("ADDED", "MODIFIED"):
                    certificate = self._see(obj)
                    if certificate is not None:
                        return certificate
        return None


async def wait_for_certificate(
    client: KubeClient,
    name: str,
    *,
    timeout: float,
    initial: JsonDict | None = None,
    progress: Callable[[str], None] | None = None,
) -> bytes:
    """The certificate of CSR `name` (PEM) once signed, watching the CSR from `initial` (the
    object as created, if at hand). Raises CertificateRequestError when it is denied, failed or
    deleted, or after `timeout` seconds with a hint at what to check."""
    waiter = _Waiter(client, name, progress)
    try:
        async with asyncio.timeout(timeout):
            return await waiter.run(initial)
    except TimeoutError:
        raise CertificateRequestError(
            f"no certificate for CertificateSigningRequest {name} after {timeout:g}s; "
            + _not_issued_hint(name, waiter.last)
        ) from None


async def request_certificate(
    client: KubeClient,
    name: str,
    key_pem: bytes,
    subject: Subject,
    *,
    expiration_seconds: int | None,
    timeout: float,
    signer_name: str = SIGNER_KUBE_APISERVER_CLIENT,
    usages: Sequence[str] = CLIENT_USAGES,
    labels: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> bytes:
    """Create a CSR for `key_pem` (only its public half is sent) and wait for the certificate."""
    request = certificate_request(key_pem, subject)
    created = await client.create(
        CERTIFICATE_SIGNING_REQUESTS,
        csr_object(
            name,
            request,
            signer_name=signer_name,
            usages=usages,
            expiration_seconds=expiration_seconds,
            labels=labels,
        ),
    )
    if progress is not None:
        progress(f"created CertificateSigningRequest {name} for {subject.common_name}")
    return await wait_for_certificate(
        client, name, timeout=timeout, initial=created, progress=progress
    )
