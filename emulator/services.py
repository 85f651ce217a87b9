"""Where the emulator reaches a Service, and how a failed dial reads.

kube-apiserver reaches admission webhooks and aggregated API servers through the cluster
network: a Service reference (`namespace`, `name`, `port`) becomes an endpoint address. The
emulator has no cluster network, so `ServiceNetwork` maps "<namespace>/<name>" to a "host:port"
on this machine (`python -m emulator --service NAMESPACE/NAME=HOST:PORT`); the certificate is
still verified for the Service's DNS name `<name>.<namespace>.svc`. One map serves webhooks and
APIServices alike.

`dial_error` renders a failed connection as Go's net/http and crypto/tls word it, which is what
kube-apiserver puts into its messages (webhook errors, APIService conditions, proxy errors).
"""

from __future__ import annotations

import argparse
import socket
import ssl
from collections.abc import Callable, Iterable, Mapping
from typing import Any


class ServiceNetwork(dict[str, str]):
    """Maps "<namespace>/<name>" of a Service to the "host:port" the emulator dials for it.
    `listeners` hear of each mapping set (with its key)."""

    def __init__(self, *args: Any, **kwargs: str) -> None:
        super().__init__(*args, **kwargs)
        self.listeners: list[Callable[[str], None]] = []

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key, value)
        for listener in list(self.listeners):
            listener(key)

    def update(  # type: ignore[override]
        self, other: Mapping[str, str] | Iterable[tuple[str, str]] = (), **kwargs: str
    ) -> None:
        for key, value in dict(other, **kwargs).items():
            self[key] = value

    def address(self, namespace: str, name: str) -> tuple[str, int] | None:
        """The mapped (host, port) of a Service, or None when it has no address here."""
        mapped = self.get(f"{namespace}/{name}")
        if not mapped:
            return None
        host, _, port = mapped.rpartition(":")
        return host.strip("[]"), int(port)


def service_dns_name(namespace: str, name: str) -> str:
    """The name a Service's serving certificate must be valid for (kube's ServerName)."""
    return f"{name}.{namespace}.svc"


def service_argument(text: str) -> tuple[str, str]:
    """A `--service NAMESPACE/NAME=HOST:PORT` argument split in its two halves (argparse type)."""
    service, _, address = text.partition("=")
    namespace, _, name = service.partition("/")
    host, _, port = address.rpartition(":")
    if not (namespace and name and host and port.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME=HOST:PORT, got {text!r}")
    return f"{namespace}/{name}", address


def _causes(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def dial_error(exc: BaseException, host: str, port: int, server_name: str) -> str:
    """Go's text for a failed request to host:port whose certificate must name `server_name`."""
    address = f"{host}:{port}"
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            if "mismatch" in (cause.verify_message or ""):
                return (
                    "tls: failed to verify certificate: x509: certificate is not valid for "
                    f"{server_name}"
                )
            return (
                "tls: failed to verify certificate: x509: certificate signed by unknown authority"
            )
        if isinstance(cause, ConnectionRefusedError):
            return f"dial tcp {address}: connect: connection refused"
        if isinstance(cause, socket.gaierror):
            return f"dial tcp: lookup {host}: no such host"
    return str(exc) or type(exc).__name__
