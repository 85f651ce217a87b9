"""Front-proxy authentication (kube's "requestheader" authenticator) and its published form.

An authenticating proxy in front of an API server (the aggregation layer in front of an
aggregated API server) presents a client certificate signed by the requestheader CA whose CN is
one of the allowed names, and names the user it authenticated in headers: X-Remote-User,
X-Remote-Uid, X-Remote-Group (one header per group), X-Remote-Extra-<key> (the key
percent-escaped, one header per value). The server trusts those headers only from such a
certificate, and drops them once read.

kube-apiserver publishes what it trusts in kube-system/extension-apiserver-authentication (its
cluster-authentication-trust controller): client-ca-file, requestheader-client-ca-file, and the
header names and allowed CNs as JSON arrays. Aggregated API servers read that ConfigMap to
configure themselves; `configmap_data` writes it and `from_configmap` reads it back.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

from .wire import ApiRequest, UserInfo

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"
# kubeadm's front-proxy client certificate CN, the one name its kube-apiserver allows.
FRONT_PROXY_CLIENT = "front-proxy-client"

_dumps = json.JSONEncoder(separators=(",", ":")).encode
# RFC 7230 token characters other than '%': what client-go leaves unescaped in a header key.
_TOKEN_CHARS = frozenset(
    "!#$&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


class UntrustedProxyError(ValueError):
    """A certificate that may not assert identities in headers (why, in kube's words)."""


@dataclass(frozen=True)
class RequestHeaderConfig:
    """Whom a server trusts to name users in headers, and which headers those are."""

    ca_pem: bytes
    allowed_names: tuple[str, ...] = (FRONT_PROXY_CLIENT,)
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    uid_headers: tuple[str, ...] = ("X-Remote-Uid",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    _cas: tuple[x509.Certificate, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_cas", tuple(x509.load_pem_x509_certificates(self.ca_pem)))

    def header_names(self) -> tuple[str, ...]:
        return self.username_headers + self.uid_headers + self.group_headers

    def configmap_data(self, client_ca_pem: bytes) -> dict[str, str]:
        """The data of kube-system/extension-apiserver-authentication, as kube-apiserver
        writes it."""
        return {
            "client-ca-file": client_ca_pem.decode(),
            "requestheader-allowed-names": _dumps(list(self.allowed_names)),
            "requestheader-client-ca-file": self.ca_pem.decode(),
            "requestheader-extra-headers-prefix": _dumps(list(self.extra_prefixes)),
            "requestheader-group-headers": _dumps(list(self.group_headers)),
            "requestheader-uid-headers": _dumps(list(self.uid_headers)),
            "requestheader-username-headers": _dumps(list(self.username_headers)),
        }

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> RequestHeaderConfig:
        """What an aggregated API server takes from the published ConfigMap."""

        def names(key: str) -> tuple[str, ...]:
            text = data.get(key) or "[]"
            return tuple(str(v) for v in json.loads(text))

        return cls(
            ca_pem=data["requestheader-client-ca-file"].encode(),
            allowed_names=names("requestheader-allowed-names"),
            username_headers=names("requestheader-username-headers"),
            uid_headers=names("requestheader-uid-headers"),
            group_headers=names("requestheader-group-headers"),
            extra_prefixes=names("requestheader-extra-headers-prefix"),
        )

    def verify_proxy(self, cert: x509.Certificate) -> None:
        """Raise UntrustedProxyError unless `cert` is a front proxy's: signed by the
        requestheader CA, its CN allowed (any CN when no names are listed)."""
        if not any(issued_by(cert, ca) for ca in self._cas):
            raise UntrustedProxyError("x509: certificate signed by unknown authority")
        cn = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
        common_name = cn[0] if cn else ""
        if self.allowed_names and common_name not in self.allowed_names:
            raise UntrustedProxyError(
                f"x509: subject with cn={common_name} is not in the allowed list"
            )

    def authenticate(self, req: ApiRequest, cert: x509.Certificate) -> UserInfo | None:
        """The user a trusted front proxy names, or None when it names nobody (the request
        then goes on to the other authenticators). The identity headers are removed."""
        self.verify_proxy(cert)
        name = _first(req, self.username_headers)
        if not name:
            return None
        uid = _first(req, self.uid_headers)
        groups = tuple(g for h in self.group_headers for g in _values(req, h))
        extra: dict[str, tuple[str, ...]] = {}
        for header in list(req.headers):
            for prefix in self.extra_prefixes:
                if header.startswith(prefix.lower()):
                    key = unquote(header[len(prefix) :].lower())
                    extra[key] = extra.get(key, ()) + tuple(_values(req, header))
        for header in [*self.header_names(), *_prefixed(req, self.extra_prefixes)]:
            req.headers.pop(header.lower(), None)
        return UserInfo(name, groups, uid, extra)


# Every request with a client certificate is checked against the front-proxy CA and the client
# CA: two signature verifications a request, some 12 % of a control plane's CPU in a burst of
# Works, for the same few certificates. The answer for a pair never changes (certificates
# compare by their DER).
@functools.lru_cache(maxsize=1024)
def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether `ca` signed `cert` (names and signature; validity is checked elsewhere)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _values(req: ApiRequest, header: str) -> list[str]:
    """A header's values: the fronts join repeated headers with ", "."""
    raw = req.headers.get(header.lower())
    if raw is None:
        return []
    return [v.strip() for v in raw.split(",") if v.strip()]


def _first(req: ApiRequest, headers: tuple[str, ...]) -> str:
    for header in headers:
        values = _values(req, header)
        if values:
            return values[0]
    return ""


def _prefixed(req: ApiRequest, prefixes: tuple[str, ...]) -> list[str]:
    return [h for h in req.headers if any(h.startswith(p.lower()) for p in prefixes)]


def escape_extra_key(key: str) -> str:
    """client-go's headerKeyEscape: bytes outside the header token set (and '%') as %XX."""
    return "".join(chr(b) if chr(b) in _TOKEN_CHARS else f"%{b:02X}" for b in key.encode("utf-8"))


def proxy_headers(user: UserInfo) -> list[tuple[str, str]]:
    """The identity headers a front proxy sends for `user` (client-go's SetAuthProxyHeaders)."""
    headers = [("X-Remote-User", user.name)]
    if user.uid:
        headers.append(("X-Remote-Uid", user.uid))
    headers += [("X-Remote-Group", group) for group in user.groups]
    for key, values in user.extra.items():
        headers += [(f"X-Remote-Extra-{escape_extra_key(key)}", value) for value in values]
    return headers


def is_identity_header(name: str) -> bool:
    """Headers a front proxy sets itself; whatever the client sent under these names goes."""
    lower = name.lower()
    return lower in ("x-remote-user", "x-remote-uid", "x-remote-group") or lower.startswith(
        "x-remote-extra-"
    )
