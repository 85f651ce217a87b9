"""The emulator's certificate authority and service-account token signer.

One CA signs the serving certificate, client certificates handed out by the
emulator, and approved CertificateSigningRequests (as kube-controller-manager's
csrsigning controller does with the cluster CA). Legacy service-account tokens
are JWTs signed with a separate RSA key, like kube-apiserver's
--service-account-key-file.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificateIssuerPrivateKeyTypes,
    CertificatePublicKeyTypes,
)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME = timedelta(days=3650)
DEFAULT_LIFETIME = timedelta(days=365)
# kube-controller-manager's csrsigning backdates NotBefore by 5 minutes and, for
# certificates of 8 hours or more, takes the backdate off NotAfter too.
SIGNER_BACKDATE = timedelta(minutes=5)
SIGNER_SHORT = timedelta(hours=8)

KeyType = Literal["ec", "rsa"]


class UnknownUsageError(ValueError):
    """A CSR asked for a key usage the certificates API does not know."""


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def generate_key(
    key_type: KeyType = "ec", rsa_bits: int = 2048
) -> CertificateIssuerPrivateKeyTypes:
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
    return ec.generate_private_key(ec.SECP256R1())


def key_to_pem(key: CertificateIssuerPrivateKeyTypes) -> bytes:
    # "RSA PRIVATE KEY" / "EC PRIVATE KEY", as kubeadm and client-go's keyutil write them.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def load_private_key(pem: bytes) -> CertificateIssuerPrivateKeyTypes:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ValueError(f"unsupported private key type {type(key).__name__}")
    return key


def load_certificates(pem: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem)


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _san(dns_names: Iterable[str], ips: Iterable[str]) -> x509.SubjectAlternativeName | None:
    general: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    general += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    return x509.SubjectAlternativeName(general) if general else None


def spki_sha256_hex(cert_pem: bytes) -> str:
    """SHA-256 of the certificate's DER SubjectPublicKeyInfo, lower-case hex (kubeadm's pin)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(spki).hexdigest()


def build_csr(
    common_name: str,
    organizations: Sequence[str] = (),
    *,
    dns_names: Sequence[str] = (),
    ips: Sequence[str] = (),
    key: CertificateIssuerPrivateKeyTypes | None = None,
    key_type: KeyType = "ec",
    rsa_bits: int = 3072,
) -> tuple[bytes, bytes]:
    """A PEM certificate request and the PEM of its private key (new unless `key` is given)."""
    if key is None:
        key = generate_key(key_type, rsa_bits)
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        _name(common_name, organizations)
    )
    san = _san(dns_names, ips)
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    csr = builder.sign(key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM), key_to_pem(key)


@dataclass(frozen=True)
class CsrInfo:
    """What approvers look at in a certificate request."""

    common_name: str
    organizations: tuple[str, ...]
    dns_names: tuple[str, ...]
    ips: tuple[str, ...]
    emails: tuple[str, ...]
    uris: tuple[str, ...]
    signature_valid: bool


def parse_csr(csr_pem: bytes) -> CsrInfo:
    """Subject and SANs of a PEM certificate request; ValueError if it does not parse."""
    csr = x509.load_pem_x509_csr(csr_pem)
    cn = [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    try:
        san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        san = x509.SubjectAlternativeName([])
    return CsrInfo(
        cn[0] if cn else "",
        tuple(orgs),
        tuple(san.get_values_for_type(x509.DNSName)),
        tuple(str(ip) for ip in san.get_values_for_type(x509.IPAddress)),
        tuple(san.get_values_for_type(x509.RFC822Name)),
        tuple(san.get_values_for_type(x509.UniformResourceIdentifier)),
        csr.is_signature_valid,
    )


# The certificates.k8s.io usage names and what they become in the certificate.
_KEY_USAGE_BITS: dict[str, str] = {
    "signing": "digital_signature",
    "digital signature": "digital_signature",
    "content commitment": "content_commitment",
    "key encipherment": "key_encipherment",
    "key agreement": "key_agreement",
    "data encipherment": "data_encipherment",
    "cert sign": "key_cert_sign",
    "crl sign": "crl_sign",
    "encipher only": "encipher_only",
    "decipher only": "decipher_only",
}
_EXT_KEY_USAGES: dict[str, x509.ObjectIdentifier] = {
    "any": x509.ObjectIdentifier("2.5.29.37.0"),
    "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
    "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
    "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "s/mime": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "ipsec end system": x509.ObjectIdentifier("1.3.6.1.5.5.7.3.5"),
    "ipsec tunnel": x509.ObjectIdentifier("1.3.6.1.5.5.7.3.6"),
    "ipsec user": x509.ObjectIdentifier("1.3.6.1.5.5.7.3.7"),
    "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
    "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING,
    "microsoft sgc": x509.ObjectIdentifier("1.3.6.1.4.1.311.10.3.3"),
    "netscape sgc": x509.ObjectIdentifier("2.16.840.1.113730.4.1"),
}


def _usage_extensions(
    usages: Iterable[str],
) -> tuple[x509.KeyUsage | None, x509.ExtendedKeyUsage | None]:
    bits: set[str] = set()
    ext: list[x509.ObjectIdentifier] = []
    unknown: list[str] = []
    for usage in usages:
        if usage in _KEY_USAGE_BITS:
            bits.add(_KEY_USAGE_BITS[usage])
        elif usage in _EXT_KEY_USAGES:
            oid = _EXT_KEY_USAGES[usage]
            if oid not in ext:
                ext.append(oid)
        else:
            unknown.append(usage)
    if unknown:
        raise UnknownUsageError(f"unrecognized usage values: {unknown}")
    key_usage = None
    if bits:
        flags = {name: name in bits for name in set(_KEY_USAGE_BITS.values())}
        key_usage = x509.KeyUsage(**flags)
    return key_usage, (x509.ExtendedKeyUsage(ext) if ext else None)


@dataclass(frozen=True)
class CertificateAuthority:
    certificate: x509.Certificate
    key: CertificateIssuerPrivateKeyTypes

    @classmethod
    def generate(
        cls,
        common_name: str = "kubernetes",
        *,
        key_type: KeyType = "ec",
        lifetime: timedelta = CA_LIFETIME,
        now: datetime | None = None,
    ) -> CertificateAuthority:
        key = generate_key(key_type)
        start = (now or _now()).replace(microsecond=0)
        name = _name(common_name)
        ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + lifetime)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=True,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(ski, critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def from_pem(cls, cert_pem: bytes, key_pem: bytes) -> CertificateAuthority:
        return cls(x509.load_pem_x509_certificate(cert_pem), load_private_key(key_pem))

    @property
    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return key_to_pem(self.key)

    @property
    def not_after(self) -> datetime:
        return self.certificate.not_valid_after_utc

    def _sign(
        self,
        *,
        subject: x509.Name,
        public_key: CertificatePublicKeyTypes,
        not_before: datetime,
        not_after: datetime,
        san: x509.SubjectAlternativeName | None,
        key_usage: x509.KeyUsage | None,
        ext_key_usage: x509.ExtendedKeyUsage | None,
    ) -> bytes:
        if not isinstance(public_key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
            raise ValueError(f"unsupported public key type {type(public_key).__name__}")
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.certificate.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(min(not_after, self.not_after))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if key_usage is not None:
            builder = builder.add_extension(key_usage, critical=True)
        if ext_key_usage is not None:
            builder = builder.add_extension(ext_key_usage, critical=False)
        if san is not None:
            builder = builder.add_extension(san, critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        organizations: Sequence[str] = (),
        *,
        dns_names: Sequence[str] = (),
        ips: Sequence[str] = (),
        usage: Literal["client", "server"] = "client",
        lifetime: timedelta = DEFAULT_LIFETIME,
        key_type: KeyType = "ec",
        now: datetime | None = None,
    ) -> tuple[bytes, bytes]:
        """A new key and a certificate for it: (cert PEM, key PEM)."""
        key = generate_key(key_type)
        start = (now or _now()).replace(microsecond=0)
        key_usage, ext = _usage_extensions(
            ["digital signature", "key encipherment", f"{usage} auth"]
        )
        cert_pem = self._sign(
            subject=_name(common_name, organizations),
            public_key=key.public_key(),
            not_before=start,
            not_after=start + lifetime,
            san=_san(dns_names, ips),
            key_usage=key_usage,
            ext_key_usage=ext,
        )
        return cert_pem, key_to_pem(key)

    def sign_csr(
        self,
        csr_pem: bytes,
        *,
        usages: Sequence[str],
        lifetime: timedelta,
        backdate: timedelta = SIGNER_BACKDATE,
        short: timedelta = SIGNER_SHORT,
        now: datetime | None = None,
    ) -> bytes:
        """Sign a CSR the way kube's csrsigning controller does for kube-apiserver-client.

        Subject and SANs come from the request, key usages from `usages` (the CSR's
        spec.usages), all other requested extensions are dropped. NotBefore is
        `backdate` in the past; NotAfter is now + lifetime (minus the backdate for
        lifetimes of `short` or more), never beyond the CA's own expiry.
        Raises ValueError for an unparsable or badly signed request and
        UnknownUsageError for an unknown usage name.
        """
        try:
            csr = x509.load_pem_x509_csr(csr_pem)
        except ValueError as e:
            raise ValueError(f"unable to parse csr: {e}") from None
        if not csr.is_signature_valid:
            raise ValueError("the certificate request's signature is invalid")
        key_usage, ext = _usage_extensions(usages)
        start = (now or _now()).replace(microsecond=0)
        if start >= self.not_after:
            raise ValueError(
                "refusing to sign a certificate that expired in the past: "
                f"NotAfter={self.not_after.isoformat()}"
            )
        end = start + lifetime if lifetime < short else start + lifetime - backdate
        try:
            san: x509.SubjectAlternativeName | None = csr.extensions.get_extension_for_class(
                x509.SubjectAlternativeName
            ).value
        except x509.ExtensionNotFound:
            san = None
        return self._sign(
            subject=csr.subject,
            public_key=csr.public_key(),
            not_before=start - backdate,
            not_after=end,
            san=san,
            key_usage=key_usage,
            ext_key_usage=ext,
        )


# --- Legacy service-account tokens -------------------------------------------------------

LEGACY_ISSUER = "kubernetes/serviceaccount"
_CLAIM_NAMESPACE = "kubernetes.io/serviceaccount/namespace"
_CLAIM_SECRET = "kubernetes.io/serviceaccount/secret.name"
_CLAIM_SA_NAME = "kubernetes.io/serviceaccount/service-account.name"
_CLAIM_SA_UID = "kubernetes.io/serviceaccount/service-account.uid"


class InvalidTokenError(Exception):
    """A token of ours that fails verification; the message is kube's."""


@dataclass(frozen=True)
class LegacyTokenClaims:
    namespace: str
    name: str
    uid: str
    secret_name: str

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ServiceAccountTokenIssuer:
    """Issues and verifies legacy (Secret-based) service-account tokens, RS256 JWTs.

    Without a key given, its own is made on first use: an RSA key costs tens of milliseconds,
    every emulator has an issuer, and most never sign or check a token."""

    def __init__(self, key: rsa.RSAPrivateKey | None = None) -> None:
        self._given = key

    @cached_property
    def _key(self) -> rsa.RSAPrivateKey:
        if self._given is not None:
            return self._given
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    @cached_property
    def _public(self) -> rsa.RSAPublicKey:
        return self._key.public_key()

    @cached_property
    def key_id(self) -> str:
        der = self._public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        # kube derives the key id from the public key the same way.
        return _b64url(hashlib.sha256(der).digest())

    @classmethod
    def generate(cls) -> ServiceAccountTokenIssuer:
        return cls()

    @classmethod
    def from_pem(cls, key_pem: bytes) -> ServiceAccountTokenIssuer:
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError("service-account signing key must be RSA")
        return cls(key)

    @property
    def key_pem(self) -> bytes:
        return key_to_pem(self._key)

    @property
    def public_key_pem(self) -> bytes:
        return self._public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def issue(self, namespace: str, name: str, uid: str, secret_name: str) -> str:
        return self.sign(
            {
                "iss": LEGACY_ISSUER,
                _CLAIM_NAMESPACE: namespace,
                _CLAIM_SECRET: secret_name,
                _CLAIM_SA_NAME: name,
                _CLAIM_SA_UID: uid,
                "sub": f"system:serviceaccount:{namespace}:{name}",
            }
        )

    def sign(self, claims: Mapping[str, Any]) -> str:
        """An RS256 JWT of `claims` signed with this key (legacy and bound tokens alike)."""
        header = {"alg": "RS256", "kid": self.key_id}
        signing_input = ".".join(
            _b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)
        )
        signature = self._key.sign(
            signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256()
        )
        return f"{signing_input}.{_b64url(signature)}"

    def verified_claims(self, token: str, issuer: str) -> dict[str, Any] | None:
        """The claims of a token from `issuer` signed with this key. None when the token is
        not a JWT or names another issuer (another authenticator may know it);
        InvalidTokenError when it is one of ours but the signature does not verify."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            header = json.loads(_b64url_decode(parts[0]))
            claims = json.loads(_b64url_decode(parts[1]))
            signature = _b64url_decode(parts[2])
        except ValueError:
            return None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return None
        if claims.get("iss") != issuer:
            return None
        if header.get("alg") != "RS256":
            raise InvalidTokenError("invalid signature, no keys found")
        try:
            self._public.verify(
                signature,
                f"{parts[0]}.{parts[1]}".encode("ascii"),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (InvalidSignature, ValueError):
            raise InvalidTokenError("invalid signature") from None
        return claims

    def verify(self, token: str) -> LegacyTokenClaims | None:
        """The claims of a valid legacy token; None when the token is not a legacy token of
        this issuer (another authenticator may know it); InvalidTokenError when it is one but
        fails verification."""
        claims = self.verified_claims(token, LEGACY_ISSUER)
        return None if claims is None else _legacy_claims(claims)


def _legacy_claims(claims: dict[str, Any]) -> LegacyTokenClaims:
    """The claims a legacy token must carry, checked in kube's order."""
    found: dict[str, str] = {}
    for key, what in (
        ("sub", "sub"),
        (_CLAIM_NAMESPACE, "namespace"),
        (_CLAIM_SECRET, "secretName"),
        (_CLAIM_SA_NAME, "serviceAccountName"),
        (_CLAIM_SA_UID, "serviceAccountUID"),
    ):
        value = claims.get(key, "")
        if not value or not isinstance(value, str):
            raise InvalidTokenError(f"{what} claim is missing")
        found[what] = value
    namespace, name = found["namespace"], found["serviceAccountName"]
    if found["sub"] != f"system:serviceaccount:{namespace}:{name}":
        raise InvalidTokenError("sub claim is invalid")
    return LegacyTokenClaims(namespace, name, found["serviceAccountUID"], found["secretName"])
