"""Request authentication, as kube-apiserver's authenticator chain.

Order and outcomes follow kube-apiserver: a front proxy's certificate with the identity it
names in headers (requestheader), a client certificate signed by the client CA, then the bearer
token (static tokens, bound and legacy service-account tokens, bootstrap tokens). Credentials that are presented but not accepted give 401 without any
anonymous fallback; a request without credentials is `system:anonymous` when
anonymous access is enabled. Every authenticated identity also gets
`system:authenticated`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from . import errors
from .pki import InvalidTokenError, ServiceAccountTokenIssuer
from .requestheader import RequestHeaderConfig, UntrustedProxyError, issued_by
from .timefmt import parse_time
from .tokenrequest import authenticate_bound_token
from .wire import ApiRequest, UserInfo

# (group, resource, namespace, name) -> the stored object, or None.
Lookup = Callable[[str, str, str, str], dict[str, Any] | None]

ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))
AUTHENTICATED = "system:authenticated"
CREDENTIAL_ID_KEY = "authentication.kubernetes.io/credential-id"

BOOTSTRAP_SECRET_TYPE = "bootstrap.kubernetes.io/token"
BOOTSTRAP_DEFAULT_GROUP = "system:bootstrappers"
_BOOTSTRAP_TOKEN = re.compile(r"\A([a-z0-9]{6})\.([a-z0-9]{16})\Z")
_BOOTSTRAP_GROUP = re.compile(r"\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\Z")
_ANY_EKU = x509.ObjectIdentifier("2.5.29.37.0")
LEGACY_TOKEN_INVALID_LABEL = "kubernetes.io/legacy-token-invalid-since"


class TokenRejectedError(Exception):
    """A bearer token nobody accepts; the message is what kube reports (e.g. in TokenReview)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


def with_authenticated(user: UserInfo) -> UserInfo:
    if AUTHENTICATED in user.groups:
        return user
    return UserInfo(user.name, (*user.groups, AUTHENTICATED), user.uid, user.extra)


def secret_data(secret: Mapping[str, Any], key: str) -> str:
    """A Secret's data value decoded from base64 ("" when absent or malformed)."""
    data = secret.get("data") or {}
    raw = data.get(key) if isinstance(data, dict) else None
    if not isinstance(raw, str):
        return ""
    try:
        return base64.b64decode(raw, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return ""


def bootstrap_token_expired(secret: Mapping[str, Any], now: datetime) -> bool:
    """As cluster-bootstrap: no expiration never expires, an unparsable one has expired."""
    value = secret_data(secret, "expiration")
    if not value:
        return False
    try:
        return parse_time(value) <= now
    except ValueError:
        return True


def bootstrap_token_groups(secret: Mapping[str, Any]) -> list[str] | None:
    """system:bootstrappers plus auth-extra-groups, sorted and de-duplicated; None if invalid."""
    groups = {BOOTSTRAP_DEFAULT_GROUP}
    extra = secret_data(secret, "auth-extra-groups")
    if extra:
        for group in extra.split(","):
            if not _BOOTSTRAP_GROUP.match(group):
                return None
            groups.add(group)
    return sorted(groups)


def _bearer_token(req: ApiRequest) -> str | None:
    header = req.headers.get("authorization", "").strip()
    if not header:
        return None
    parts = header.split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return None
    return parts[1] or None


def _deleted(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


class Authenticator:
    def __init__(
        self,
        *,
        static_tokens: Mapping[str, UserInfo],
        sa_tokens: ServiceAccountTokenIssuer | None,
        lookup: Lookup,
        clock: Callable[[], datetime] = _utcnow,
        anonymous: bool = True,
        client_ca_pem: bytes | None = None,
        requestheader: RequestHeaderConfig | None = None,
    ) -> None:
        self.static_tokens = dict(static_tokens)
        self.sa_tokens = sa_tokens
        self.lookup = lookup
        self.clock = clock
        self.anonymous = anonymous
        # The TLS layer accepts certificates of both CAs: each authenticator checks its own.
        self.client_cas = (
            tuple(x509.load_pem_x509_certificates(client_ca_pem)) if client_ca_pem else ()
        )
        self.requestheader = requestheader

    def authenticate(self, req: ApiRequest) -> UserInfo:
        """The request's identity; raises errors.unauthorized() for rejected credentials."""
        failed = False
        if req.peer_cert_der is not None and self.requestheader is not None:
            cert = x509.load_der_x509_certificate(req.peer_cert_der)
            try:
                proxied = self.requestheader.authenticate(req, cert)
            except UntrustedProxyError:
                proxied = None
            if proxied is not None:
                return with_authenticated(proxied)
        if req.peer_cert_der is not None:
            try:
                user = self.user_from_certificate(req.peer_cert_der)
            except ValueError:
                failed = True
            else:
                if user is not None:
                    return with_authenticated(user)
        token = _bearer_token(req)
        if token is not None:
            try:
                return self.authenticate_token(token)
            except TokenRejectedError:
                failed = True
        if failed or not self.anonymous:
            raise errors.unauthorized()
        return ANONYMOUS

    def user_from_certificate(self, der: bytes) -> UserInfo | None:
        """CN = user, O = groups. The TLS layer already verified the chain; this checks what
        kube's x509 authenticator checks on top (validity now, client-auth usage). None when
        the certificate names nobody (empty CN); ValueError when it is not acceptable."""
        cert = x509.load_der_x509_certificate(der)
        if self.client_cas and not any(issued_by(cert, ca) for ca in self.client_cas):
            raise ValueError("x509: certificate signed by unknown authority")
        now = self.clock()
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise ValueError("x509: certificate has expired or is not yet valid")
        try:
            eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            eku = None
        if eku is not None and not (ExtendedKeyUsageOID.CLIENT_AUTH in eku or _ANY_EKU in eku):
            raise ValueError("x509: certificate specifies an incompatible key usage")
        cn = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
        if not cn or not cn[0]:
            return None
        orgs = tuple(
            str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        )
        credential = "X509SHA256=" + hashlib.sha256(der).hexdigest()
        return UserInfo(cn[0], orgs, extra={CREDENTIAL_ID_KEY: (credential,)})

    def authenticate_token(self, token: str, audiences: tuple[str, ...] = ()) -> UserInfo:
        """A bearer token's identity (with system:authenticated); TokenRejectedError if none.
        `audiences` (a TokenReview's spec.audiences): a bound token must be meant for one of
        them instead of for the API server."""
        user = self.static_tokens.get(token)
        if user is not None:
            return with_authenticated(user)
        problems: list[str] = []
        if self.sa_tokens is not None:
            try:
                user = self._service_account(token, audiences)
            except InvalidTokenError as e:
                problems.append(str(e))
            if user is not None:
                return with_authenticated(user)
        user = self._bootstrap(token)
        if user is not None:
            return with_authenticated(user)
        if not problems:
            raise TokenRejectedError("invalid bearer token")
        raise TokenRejectedError(problems[0])

    def _service_account(self, token: str, audiences: tuple[str, ...] = ()) -> UserInfo | None:
        assert self.sa_tokens is not None
        bound = authenticate_bound_token(
            self.sa_tokens, token, self.lookup, self.clock(), *((audiences,) if audiences else ())
        )
        if bound is not None:
            return bound
        claims = self.sa_tokens.verify(token)
        if claims is None:
            return None
        secret = self.lookup("", "secrets", claims.namespace, claims.secret_name)
        if secret is None or _deleted(secret):
            raise InvalidTokenError("Token has been invalidated")
        labels = (secret.get("metadata") or {}).get("labels") or {}
        if LEGACY_TOKEN_INVALID_LABEL in labels:
            raise InvalidTokenError("Token has been invalidated")
        if not hmac.compare_digest(secret_data(secret, "token").encode(), token.encode()):
            raise InvalidTokenError("Token does not match server's copy")
        sa = self.lookup("", "serviceaccounts", claims.namespace, claims.name)
        if sa is None:
            raise InvalidTokenError(f'serviceaccount "{claims.name}" not found')
        if _deleted(sa):
            raise InvalidTokenError(
                f"ServiceAccount {claims.namespace}/{claims.name} has been deleted"
            )
        live_uid = (sa.get("metadata") or {}).get("uid", "")
        if live_uid != claims.uid:
            raise InvalidTokenError(
                f"ServiceAccount UID ({live_uid}) does not match claim ({claims.uid})"
            )
        return UserInfo(
            claims.username,
            ("system:serviceaccounts", f"system:serviceaccounts:{claims.namespace}"),
            claims.uid,
        )

    def _bootstrap(self, token: str) -> UserInfo | None:
        m = _BOOTSTRAP_TOKEN.match(token)
        if not m:
            return None
        token_id, token_secret = m.groups()
        secret = self.lookup("", "secrets", "kube-system", f"bootstrap-token-{token_id}")
        if secret is None or _deleted(secret):
            return None
        if secret.get("type") != BOOTSTRAP_SECRET_TYPE or secret.get("data") is None:
            return None
        stored = secret_data(secret, "token-secret")
        if not hmac.compare_digest(stored.encode(), token_secret.encode()):
            return None
        if secret_data(secret, "token-id") != token_id:
            return None
        if bootstrap_token_expired(secret, self.clock()):
            return None
        if secret_data(secret, "usage-bootstrap-authentication") != "true":
            return None
        groups = bootstrap_token_groups(secret)
        if groups is None:
            return None
        return UserInfo(f"system:bootstrap:{token_id}", tuple(groups))
