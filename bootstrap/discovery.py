"""Trust on first use, done safely: verify cluster-info and pin the control plane's CA.

`kube-public/cluster-info` holds a kubeconfig and, per bootstrap token, a detached
JWS (`jws-kubeconfig-<token id>`): HS256 over the exact kubeconfig text, keyed by
the token's secret. A valid signature proves the kubeconfig came from someone who
knows the token; the CA hash pin (SHA-256 of the CA's SubjectPublicKeyInfo) proves
the CA is the one the administrator meant.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from agent.kube.backoff import Backoff
from agent.kube.config import ClientConfig
from agent.kube.errors import TransportError
from bootstrap.waiting import reporting

from .kubeconfig import anonymous_client_config, open_client
from .tokens import BootstrapToken

PIN_PATTERN = re.compile(r"^sha256:([0-9a-f]{64})$")


class DiscoveryError(Exception):
    """Discovery refused the control plane; nothing may be written."""


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def verify_detached(content: str, jws: str, token: BootstrapToken) -> None:
    parts = jws.split(".")
    if len(parts) != 3 or parts[1] != "":
        raise DiscoveryError("the cluster-info signature is not a detached JWS")
    try:
        header = json.loads(_b64url_decode(parts[0]))
        signature = _b64url_decode(parts[2])
    except (ValueError, json.JSONDecodeError) as err:
        raise DiscoveryError(f"the cluster-info signature cannot be decoded: {err}") from None
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise DiscoveryError("the cluster-info signature does not use HS256")
    if header.get("kid") != token.id:
        raise DiscoveryError("the cluster-info signature was made for another token")
    signing_input = f"{parts[0]}.{_b64url(content.encode())}".encode()
    expected = hmac.new(token.secret.encode(), signing_input, hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature):
        raise DiscoveryError(
            "the cluster-info kubeconfig does not match its signature for this token: "
            "the token is wrong, or cluster-info was tampered with"
        )


def spki_pin(cert_pem: bytes) -> str:
    cert = x509.load_pem_x509_certificate(cert_pem)
    spki = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def parse_pins(values: list[str]) -> set[str]:
    pins: set[str] = set()
    for value in values:
        for item in value.split(","):
            item = item.strip().lower()
            if not item:
                continue
            if not PIN_PATTERN.match(item):
                raise DiscoveryError(
                    f"invalid --discovery-token-ca-cert-hash {item!r}: expected sha256:<64 hex digits>"
                )
            pins.add(item)
    return pins


def split_pem_bundle(bundle: bytes) -> list[bytes]:
    marker = b"-----END CERTIFICATE-----"
    return [
        chunk.strip() + b"\n" + marker + b"\n"
        for chunk in bundle.split(marker)
        if b"BEGIN" in chunk
    ]


@dataclass(frozen=True)
class ClusterInfo:
    server: str
    ca_pem: bytes


def parse_cluster_info_kubeconfig(text: str) -> ClusterInfo:
    try:
        config: Any = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise DiscoveryError(f"cluster-info holds no valid kubeconfig: {err}") from None
    clusters = config.get("clusters") if isinstance(config, dict) else None
    if not isinstance(clusters, list) or len(clusters) != 1:
        raise DiscoveryError("cluster-info must hold a kubeconfig with exactly one cluster")
    cluster = clusters[0].get("cluster") or {}
    ca_data = cluster.get("certificate-authority-data")
    if not ca_data:
        raise DiscoveryError("the cluster-info kubeconfig has no certificate-authority-data")
    return ClusterInfo(str(cluster.get("server", "")), base64.b64decode(ca_data))


def check_pins(ca_bundle: bytes, pins: set[str]) -> bytes:
    """Return the first CA certificate whose SPKI hash is pinned; refuse otherwise."""
    certs = split_pem_bundle(ca_bundle)
    if not certs:
        raise DiscoveryError("the cluster-info kubeconfig holds no CA certificate")
    for cert in certs:
        if spki_pin(cert) in pins:
            return cert
    found = ", ".join(spki_pin(c) for c in certs)
    raise DiscoveryError(
        f"none of the control plane's CA certificates matches --discovery-token-ca-cert-hash "
        f"(the server presented {found}); check the hash with the control plane's administrator"
    )


# --- fetching cluster-info ------------------------------------------------------------------

CLUSTER_INFO_PATH = "/api/v1/namespaces/kube-public/configmaps/cluster-info"
JWS_PREFIX = "jws-kubeconfig-"


@dataclass(frozen=True)
class ValidatedClusterInfo:
    """The control plane's CA (pinned, or unverified with the unsafe flag) and its kubeconfig."""

    ca_pem: bytes
    kubeconfig: str
    server: str
    verified: bool


async def _fetch(config: ClientConfig) -> dict[str, str] | None:
    async with open_client(config) as client:
        response = await client.raw_get(CLUSTER_INFO_PATH)
    if response.status == 200:
        data = (response.json() or {}).get("data") or {}
        return {str(k): str(v) for k, v in data.items()}
    if response.status in (401, 403):
        raise DiscoveryError(
            f"the control plane refused an anonymous read of kube-public/cluster-info "
            f"(HTTP {response.status}): anonymous auth or the Role/RoleBinding "
            "system:karmada:bootstrap-signer-clusterinfo is missing; its administrator can run "
            "`karmada-bootstrap token create --ensure-prerequisites`"
        )
    return None


async def retrieve_validated(
    server: str,
    token: BootstrapToken,
    pins: set[str],
    *,
    unsafe_skip_ca_verification: bool,
    timeout: float,
    progress: Callable[[str], None] = lambda _m: None,
) -> ValidatedClusterInfo:
    """karmadactl register's discovery: untrusted read, JWS check, CA pin, trusted re-read."""
    if not pins and not unsafe_skip_ca_verification:
        raise DiscoveryError(
            "give --discovery-token-ca-cert-hash (printed by `karmada-bootstrap token create "
            "--print-register-command`), or accept the risk with "
            "--discovery-token-unsafe-skip-ca-verification"
        )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    key = JWS_PREFIX + token.id
    poll = Backoff(initial=0.2, cap=5.0, jitter=0.0)
    progress(f"reading cluster-info from {server} (not trusting the server yet)")
    async with reporting(
        progress, f"cluster-info signed for token id {token.id!r}", timeout
    ) as waiting:
        while True:
            try:
                data = await _fetch(anonymous_client_config(server, None))
            except TransportError as exc:
                data = None
                waiting.problem(str(exc))
            if data is not None and key in data and "kubeconfig" in data:
                break
            if data is not None:
                waiting.problem(
                    f"cluster-info has no signature for token id {token.id!r}: the token is "
                    "unknown, expired or lacks the 'signing' usage, or the control plane's "
                    "bootstrapsigner controller has not signed it (yet)"
                )
            delay = poll.next()
            if loop.time() + delay > deadline:
                raise DiscoveryError(
                    f"discovery gave up after {timeout:g}s: {waiting.detail or 'no cluster-info'}"
                )
            await asyncio.sleep(delay)

    content = data["kubeconfig"]
    verify_detached(content, data[key], token)
    info = parse_cluster_info_kubeconfig(content)
    if not pins:
        return ValidatedClusterInfo(info.ca_pem, content, info.server, verified=False)
    check_pins(info.ca_pem, pins)
    progress("cluster-info signature and CA hash verified; re-reading it over trusted TLS")
    try:
        again = await _fetch(anonymous_client_config(server, info.ca_pem))
    except TransportError as exc:
        raise DiscoveryError(
            f"cannot re-read cluster-info over TLS verified with the pinned CA: {exc}"
        ) from None
    if again is None or again.get("kubeconfig") != content:
        raise DiscoveryError(
            "cluster-info changed between the untrusted and the trusted read; refusing to continue"
        )
    return ValidatedClusterInfo(info.ca_pem, content, info.server, verified=True)
