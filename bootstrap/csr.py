"""The bootstrap tool's certificate requests, on top of agent.certificates.

Keys are generated where they will be used and never sent anywhere; only the request
(public key and subject) goes to the control plane. The objects `register` creates carry
the `karmada.io/system` label, as upstream's do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from agent.certificates import (
    CLIENT_USAGES,
    SIGNER_KUBE_APISERVER_CLIENT,
    CertificateRequestError,
    Subject,
    certificate_request,
    csr_object,
    new_private_key,
    random_suffix,
    request_certificate,
    wait_for_certificate,
)
from agent.karmada.names import system_labels
from agent.kube.client import KubeClient

__all__ = [
    "CLIENT_USAGES",
    "SIGNER_KUBE_APISERVER_CLIENT",
    "CertificateRequestError",
    "Subject",
    "certificate_request",
    "csr_object",
    "new_private_key",
    "random_suffix",
    "request_agent_certificate",
    "wait_for_certificate",
    "write_private",
]


async def request_agent_certificate(
    client: KubeClient,
    name: str,
    key_pem: bytes,
    subject: Subject,
    *,
    expiration_seconds: int | None,
    timeout: float,
    progress: Callable[[str], None] | None = None,
) -> bytes:
    """A client certificate for `subject` through a CSR labelled as a Karmada system object."""
    return await request_certificate(
        client,
        name,
        key_pem,
        subject,
        expiration_seconds=expiration_seconds,
        timeout=timeout,
        labels=system_labels(),
        progress=progress,
    )


def write_private(path: Path, data: bytes) -> None:
    """Write key material readable by the owner only, never briefly world-readable."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)
