"""The cluster's tunnel CA and the serving certificate for its route name.

Member API server certificates carry the same generic names everywhere (kubernetes,
kubernetes.default.svc, ...), and Karmada has no TLS server-name override: the name the control
plane verifies is the apiEndpoint host, here the route name. So the agent terminates TLS for that
name with a certificate from a CA of the cluster's own, published as the Cluster Secret's
`caBundle` at registration, and relays what it decrypts to its member API server over TLS it
verifies with the member's CA.

The CA lives in a member Secret (type kubernetes.io/tls, default
`karmada-system/karmada-agent-tunnel-ca`), created by whichever replica comes first and read by
the others, so every replica serves under the published CA and a restart does not change it. Its
key is only ever in that Secret and in memory; it is never logged. The serving certificate is
issued in memory for the route name, and again when less than a fifth of its lifetime is left.
"""

from __future__ import annotations

import base64
import contextlib
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from agent.kube.client import KubeClient
from agent.kube.errors import AlreadyExistsError, NotFoundError
from agent.kube.resources import NAMESPACES, SECRETS
from agent.kube.transport import load_cert_chain_pem

SECRET_NAME = "karmada-agent-tunnel-ca"
SECRET_TYPE = "kubernetes.io/tls"
CA_LIFETIME = timedelta(days=3650)
SERVING_LIFETIME = timedelta(days=365)
RENEW_AT_REMAINING = 0.2
# A CA closer than this to its end is replaced (and published again at the next registration).
CA_MINIMUM_REMAINING = timedelta(days=90)
_BACKDATE = timedelta(minutes=5)


class RouteCAError(Exception):
    """The tunnel CA Secret cannot be read, created or used; the message says why."""


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not ca,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def new_ca(cluster: str, now: datetime | None = None) -> tuple[bytes, bytes]:
    """A self-signed CA for one cluster's route: (cert PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    start = (now or _now()) - _BACKDATE
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"karmada-tunnel-ca:{cluster}")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _pem(cert), _key_pem(key)


@dataclass(frozen=True)
class ServingCertificate:
    cert_pem: bytes
    key_pem: bytes
    not_before: datetime
    not_after: datetime

    def due_for_renewal(self, now: datetime) -> bool:
        left = (self.not_after - now) / (self.not_after - self.not_before)
        return left < RENEW_AT_REMAINING


def issue_serving(
    ca_cert_pem: bytes, ca_key_pem: bytes, host: str, now: datetime | None = None
) -> ServingCertificate:
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise RouteCAError("the tunnel CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    start = (now or _now()) - _BACKDATE
    end = min(start + SERVING_LIFETIME, ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCertificate(_pem(cert), _key_pem(key), start, end)


def _tls_context(serving: ServingCertificate, alpn: list[str]) -> ssl.SSLContext:
    """TLS for the route name, HTTP/2 and HTTP/1.1 offered as kube-apiserver does (or only
    HTTP/1.1, where the agent answers itself: agent.tunnel.refusal)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_NONE  # the control plane authenticates to the member, not here
    load_cert_chain_pem(ctx, serving.cert_pem, serving.key_pem)
    ctx.set_alpn_protocols(alpn)
    return ctx


class RouteCA:
    """The tunnel CA of one cluster, kept in a member Secret, and the route's TLS context."""

    def __init__(self, member: KubeClient, *, namespace: str, cluster: str, host: str) -> None:
        self._member = member
        self.namespace = namespace
        self.cluster = cluster
        self.host = host
        self._ca: tuple[bytes, bytes] | None = None
        self._serving: ServingCertificate | None = None
        self._context: ssl.SSLContext | None = None
        self._http1_context: ssl.SSLContext | None = None

    @property
    def ca_pem(self) -> bytes:
        if self._ca is None:
            raise RouteCAError("the tunnel CA has not been loaded")
        return self._ca[0]

    @property
    def ca_bundle(self) -> str:
        """The CA as the Cluster Secret's `caBundle` holds it (base64 of the PEM)."""
        return base64.b64encode(self.ca_pem).decode()

    async def load(self) -> None:
        """Read the CA Secret, creating it (or replacing an unusable or ending CA) as needed.
        KubeError when the member cannot be reached or refuses."""
        try:
            secret = await self._member.get(SECRETS, SECRET_NAME, namespace=self.namespace)
        except NotFoundError:
            secret = await self._create()
        ca = self._usable(secret)
        if ca is None:
            ca = new_ca(self.cluster)
            await self._member.patch(
                SECRETS, SECRET_NAME, {"data": self._data(ca)}, namespace=self.namespace
            )
        self._ca = ca
        self._serving = None

    async def _create(self) -> dict[str, object]:
        ca = new_ca(self.cluster)
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": SECRET_TYPE,
            "metadata": {
                "name": SECRET_NAME,
                "namespace": self.namespace,
                "labels": {"app": "karmada-agent"},
            },
            "data": self._data(ca),
        }
        for attempt in range(2):
            try:
                return await self._member.create(SECRETS, body)
            except AlreadyExistsError:  # another replica was first: use its CA
                return await self._member.get(SECRETS, SECRET_NAME, namespace=self.namespace)
            except NotFoundError:
                if attempt:
                    raise
                # An agent run from outside the cluster: its namespace may not exist yet.
                namespace = {"apiVersion": "v1", "kind": "Namespace"}
                with contextlib.suppress(AlreadyExistsError):
                    await self._member.create(
                        NAMESPACES, {**namespace, "metadata": {"name": self.namespace}}
                    )
        raise AssertionError("unreachable")

    @staticmethod
    def _data(ca: tuple[bytes, bytes]) -> dict[str, str]:
        return {
            "tls.crt": base64.b64encode(ca[0]).decode(),
            "tls.key": base64.b64encode(ca[1]).decode(),
        }

    @staticmethod
    def _usable(secret: dict[str, object]) -> tuple[bytes, bytes] | None:
        data = secret.get("data")
        if not isinstance(data, dict):
            return None
        try:
            cert_pem = base64.b64decode(str(data.get("tls.crt") or ""), validate=True)
            key_pem = base64.b64decode(str(data.get("tls.key") or ""), validate=True)
            cert = x509.load_pem_x509_certificate(cert_pem)
            key = serialization.load_pem_private_key(key_pem, password=None)
        except ValueError:
            return None
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            return None
        if key.public_key() != cert.public_key():
            return None
        if cert.not_valid_after_utc - _now() < CA_MINIMUM_REMAINING:
            return None
        return cert_pem, key_pem

    def server_context(self) -> ssl.SSLContext:
        """The TLS context for the route name; a new serving certificate when it is due."""
        if self._ca is None:
            raise RouteCAError("the tunnel CA has not been loaded")
        now = _now()
        if self._serving is None or self._serving.due_for_renewal(now):
            self._serving = issue_serving(self._ca[0], self._ca[1], self.host, now)
            self._context = _tls_context(self._serving, ["h2", "http/1.1"])
            self._http1_context = _tls_context(self._serving, ["http/1.1"])
        assert self._context is not None
        return self._context

    def http1_context(self) -> ssl.SSLContext:
        """As `server_context`, offering HTTP/1.1 only."""
        self.server_context()
        assert self._http1_context is not None
        return self._http1_context
