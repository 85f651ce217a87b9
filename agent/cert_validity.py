"""A certificate's validity period, read from its DER with the standard library.

certRotation checks the certificate in use every interval; that needs only notBefore and
notAfter. Reading them through `cryptography` would load its Rust extension (about 8 MiB of
resident memory) into every idle agent, so `cryptography` is imported only to make a key and a
CSR when a rotation is due (agent.certificates). The fields sit at fixed places in the
structure (RFC 5280, 4.1):

    Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }
    TBSCertificate ::= SEQUENCE { [0] version OPTIONAL, serialNumber INTEGER,
                                  signature SEQUENCE, issuer SEQUENCE, validity SEQUENCE, ... }
    Validity ::= SEQUENCE { notBefore Time, notAfter Time }
    Time ::= CHOICE { UTCTime YYMMDDHHMMSSZ, GeneralizedTime YYYYMMDDHHMMSSZ }
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\s*(.*?)\s*-----END CERTIFICATE-----", re.DOTALL
)
_SEQUENCE, _INTEGER, _VERSION = 0x30, 0x02, 0xA0
_UTC_TIME, _GENERALIZED_TIME = 0x17, 0x18


class CertificateError(ValueError):
    """PEM data that holds no usable certificate or key."""


@dataclass(frozen=True)
class Lifetime:
    """When a certificate (or the intersection of a bundle's validity periods) is valid."""

    not_before: datetime
    not_after: datetime

    @property
    def total(self) -> timedelta:
        return self.not_after - self.not_before

    def remaining(self, now: datetime | None = None) -> timedelta:
        return self.not_after - (now or datetime.now(UTC))

    def remaining_fraction(self, now: datetime | None = None) -> float:
        """(notAfter - now) / (notAfter - notBefore): 1 when fresh, 0 at expiry, negative after.
        An empty or inverted validity period counts as used up (0)."""
        total = self.total.total_seconds()
        if total <= 0:
            return 0.0
        return self.remaining(now).total_seconds() / total


def validity_problem(lifetime: Lifetime, now: datetime, clock: str) -> tuple[str, str] | None:
    """("expired" or "not yet valid", a sentence saying when) when `now` (as `clock` tells
    it) is outside the validity period; None inside."""
    not_after = lifetime.not_after.isoformat()
    if now > lifetime.not_after:
        ago = round((now - lifetime.not_after).total_seconds())
        return "expired", f"it expired at {not_after} ({ago}s ago by {clock})"
    if now < lifetime.not_before:
        ahead = round((lifetime.not_before - now).total_seconds())
        return "not yet valid", (
            f"it is not valid before {lifetime.not_before.isoformat()} ({ahead}s from now by "
            f"{clock}; valid until {not_after})"
        )
    return None


def certificate_lifetime(cert_pem: bytes) -> Lifetime:
    """Over every certificate in the PEM: the latest notBefore and the earliest notAfter."""
    lifetimes = [validity(der) for der in pem_certificates(cert_pem)]
    return Lifetime(
        not_before=max(lifetime.not_before for lifetime in lifetimes),
        not_after=min(lifetime.not_after for lifetime in lifetimes),
    )


def pem_certificates(cert_pem: bytes) -> list[bytes]:
    """The DER of every CERTIFICATE block, in order; CertificateError when there is none."""
    blocks = _PEM_CERTIFICATE.findall(cert_pem)
    if not blocks:
        raise CertificateError("no certificate in the PEM data")
    ders = []
    for block in blocks:
        try:
            ders.append(base64.b64decode(b"".join(block.split()), validate=True))
        except (binascii.Error, ValueError) as exc:
            raise CertificateError(f"cannot parse the certificate: bad base64: {exc}") from exc
    return ders


def validity(der: bytes) -> Lifetime:
    """notBefore and notAfter of one DER certificate."""
    try:
        tag, certificate, _ = _element(der, 0)
        _expect(tag, _SEQUENCE, "certificate")
        tag, tbs, _ = _element(certificate, 0)
        _expect(tag, _SEQUENCE, "tbsCertificate")
        offset = 0
        tag, _, after = _element(tbs, offset)
        if tag == _VERSION:
            offset = after
            tag, _, after = _element(tbs, offset)
        _expect(tag, _INTEGER, "serialNumber")
        for field in ("signature", "issuer"):
            tag, _, after = _element(tbs, after)
            _expect(tag, _SEQUENCE, field)
        tag, period, _ = _element(tbs, after)
        _expect(tag, _SEQUENCE, "validity")
        before_tag, before, after = _element(period, 0)
        after_tag, not_after, _ = _element(period, after)
        return Lifetime(_time(before_tag, before), _time(after_tag, not_after))
    except IndexError as exc:
        raise CertificateError("cannot parse the certificate: truncated DER") from exc


def _element(data: bytes, offset: int) -> tuple[int, bytes, int]:
    """The DER element at offset: its tag, its contents and the offset after it."""
    tag = data[offset]
    length = data[offset + 1]
    start = offset + 2
    if length & 0x80:
        count = length & 0x7F
        if not 1 <= count <= 4:
            raise CertificateError("cannot parse the certificate: bad DER length")
        length = int.from_bytes(data[start : start + count], "big")
        start += count
    end = start + length
    if end > len(data):
        raise CertificateError("cannot parse the certificate: truncated DER")
    return tag, data[start:end], end


def _expect(tag: int, wanted: int, field: str) -> None:
    if tag != wanted:
        raise CertificateError(f"cannot parse the certificate: unexpected DER at {field}")


def _time(tag: int, value: bytes) -> datetime:
    text = value.decode("ascii", errors="replace")
    if tag == _UTC_TIME and re.fullmatch(r"\d{12}Z", text):
        year = int(text[:2])
        text = ("19" if year >= 50 else "20") + text
    elif not (tag == _GENERALIZED_TIME and re.fullmatch(r"\d{14}Z", text)):
        raise CertificateError(f"cannot parse the certificate: bad validity time {text!r}")
    try:
        return datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=UTC)
    except ValueError as exc:
        raise CertificateError(f"cannot parse the certificate: bad validity time {text!r}") from exc
