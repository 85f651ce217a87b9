"""Bootstrap tokens: format, generation, and their kube-system Secret.

A token is `<id>.<secret>` with id `[a-z0-9]{6}` and secret `[a-z0-9]{16}`; the API
server authenticates it as `system:bootstrap:<id>` from the Secret
`kube-system/bootstrap-token-<id>` (type `bootstrap.kubernetes.io/token`).
"""

from __future__ import annotations

import base64
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agent.timefmt import rfc3339

TOKEN_PATTERN = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
GROUP_PATTERN = re.compile(r"^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$")
SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_NAMESPACE = "kube-system"
SECRET_PREFIX = "bootstrap-token-"
# The keys of a bootstrap token Secret's data.
ID_KEY = "token-id"
SECRET_KEY = "token-secret"
DESCRIPTION_KEY = "description"
EXPIRATION_KEY = "expiration"
USAGE_PREFIX = "usage-bootstrap-"
EXTRA_GROUPS_KEY = "auth-extra-groups"
DEFAULT_GROUP = "system:bootstrappers:karmada:default-cluster-token"
DEFAULT_USAGES = ("signing", "authentication")
KNOWN_USAGES = ("signing", "authentication")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


class TokenFormatError(ValueError):
    pass


@dataclass(frozen=True)
class BootstrapToken:
    id: str
    secret: str

    def __str__(self) -> str:
        return f"{self.id}.{self.secret}"

    def __repr__(self) -> str:
        # Never show the secret half in logs or tracebacks.
        return f"BootstrapToken(id={self.id!r}, secret=<redacted>)"

    @property
    def secret_name(self) -> str:
        return SECRET_PREFIX + self.id


def generate() -> BootstrapToken:
    def part(n: int) -> str:
        return "".join(secrets.choice(_ALPHABET) for _ in range(n))

    return BootstrapToken(part(6), part(16))


def parse(text: str) -> BootstrapToken:
    match = TOKEN_PATTERN.match(text.strip())
    if not match:
        raise TokenFormatError("the bootstrap token must be of the form [a-z0-9]{6}.[a-z0-9]{16}")
    return BootstrapToken(match.group(1), match.group(2))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret_manifest(
    token: BootstrapToken,
    *,
    ttl: timedelta | None,
    usages: tuple[str, ...] = DEFAULT_USAGES,
    groups: tuple[str, ...] = (DEFAULT_GROUP,),
    description: str = "",
    now: datetime,
) -> dict[str, Any]:
    for usage in usages:
        if usage not in KNOWN_USAGES:
            raise TokenFormatError(
                f"unknown usage {usage!r}; valid usages are {', '.join(KNOWN_USAGES)}"
            )
    for group in groups:
        if not GROUP_PATTERN.match(group):
            raise TokenFormatError(
                f"group {group!r} must match {GROUP_PATTERN.pattern} (a system:bootstrappers: group)"
            )
    data = {ID_KEY: token.id, SECRET_KEY: token.secret}
    if description:
        data[DESCRIPTION_KEY] = description
    if ttl is not None and ttl.total_seconds() > 0:
        data[EXPIRATION_KEY] = rfc3339(now + ttl)
    for usage in usages:
        data[USAGE_PREFIX + usage] = "true"
    if groups:
        data[EXTRA_GROUPS_KEY] = ",".join(groups)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": token.secret_name, "namespace": SECRET_NAMESPACE},
        "type": SECRET_TYPE,
        "data": {key: _b64(value) for key, value in data.items()},
    }
