"""Parsing CSR objects and the request checks of kube's signers and Karmada's approver."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import ExtensionOID, NameOID

from emulator.loopback import JSON

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving"
LEGACY_UNKNOWN_SIGNER = "kubernetes.io/legacy-unknown"


@dataclass(frozen=True)
class ParsedRequest:
    pem: str
    common_name: str
    organizations: tuple[str, ...]
    dns_names: tuple[str, ...]
    emails: tuple[str, ...]
    ips: tuple[str, ...]
    uris: tuple[str, ...]


def parse_csr_object(csr: JSON) -> ParsedRequest:
    """Decode spec.request (base64 of a PEM CERTIFICATE REQUEST); ValueError if malformed."""
    raw = base64.b64decode(csr.get("spec", {}).get("request", ""))
    pem = raw.decode()
    if "-----BEGIN CERTIFICATE REQUEST-----" not in pem:
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    request = x509.load_pem_x509_csr(raw)
    subject = request.subject
    cns = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    dns: list[str] = []
    emails: list[str] = []
    ips: list[str] = []
    uris: list[str] = []
    try:
        san = request.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME).value
    except x509.ExtensionNotFound:
        san = None
    if isinstance(san, x509.SubjectAlternativeName):
        dns = [str(v) for v in san.get_values_for_type(x509.DNSName)]
        emails = [str(v) for v in san.get_values_for_type(x509.RFC822Name)]
        ips = [str(v) for v in san.get_values_for_type(x509.IPAddress)]
        uris = [str(v) for v in san.get_values_for_type(x509.UniformResourceIdentifier)]
    return ParsedRequest(
        pem=pem,
        common_name=str(cns[0].value) if cns else "",
        organizations=tuple(str(o.value) for o in orgs),
        dns_names=tuple(dns),
        emails=tuple(emails),
        ips=tuple(ips),
        uris=tuple(uris),
    )


def condition_true(csr: JSON, condition_type: str) -> bool:
    return any(
        c.get("type") == condition_type and c.get("status", "True") == "True"
        for c in csr.get("status", {}).get("conditions") or []
    )


def is_approved(csr: JSON) -> bool:
    """Approved and not denied, as kube's certificates helper decides."""
    types = {c.get("type") for c in csr.get("status", {}).get("conditions") or []}
    return "Approved" in types and "Denied" not in types


class RequestRejectedError(ValueError):
    pass


def check_api_server_client(usages: list[str]) -> None:
    has_client_auth = False
    for usage in usages:
        if usage in ("digital signature", "key encipherment"):
            continue
        if usage == "client auth":
            has_client_auth = True
            continue
        raise RequestRejectedError(f"invalid usage for client certificate: {usage}")
    if not has_client_auth:
        raise RequestRejectedError("missing required usage for client certificate: client auth")


_KUBELET_CLIENT_USAGES = (
    {"digital signature", "key encipherment", "client auth"},
    {"digital signature", "client auth"},
)
_KUBELET_SERVING_USAGES = (
    {"digital signature", "key encipherment", "server auth"},
    {"digital signature", "server auth"},
)


def _refuse_alt_names(req: ParsedRequest, *kinds: str, email: str = "Email") -> None:
    """Reject a request carrying subjectAltNames of any of `kinds`, checked in that order
    (dns_names, emails, ips, uris); `email` is how the message spells that kind."""
    labels = {"dns_names": "DNS", "emails": email, "ips": "IP", "uris": "URI"}
    for kind in kinds:
        if getattr(req, kind):
            raise RequestRejectedError(f"{labels[kind]} subjectAltNames are not allowed")


def check_kubelet_client(req: ParsedRequest, usages: list[str]) -> None:
    if list(req.organizations) != ["system:nodes"]:
        raise RequestRejectedError("subject organization is not system:nodes")
    _refuse_alt_names(req, "dns_names", "emails", "ips", "uris")
    if not req.common_name.startswith("system:node:"):
        raise RequestRejectedError("subject common name does not begin with system:node:")
    if set(usages) not in _KUBELET_CLIENT_USAGES:
        raise RequestRejectedError(
            "usages did not match [client auth digital signature key encipherment]"
        )


def check_kubelet_serving(req: ParsedRequest, usages: list[str]) -> None:
    if set(usages) not in _KUBELET_SERVING_USAGES:
        raise RequestRejectedError(
            "usages did not match [digital signature key encipherment server auth]"
        )
    if not req.dns_names and not req.ips:
        raise RequestRejectedError("DNS or IP subjectAltName is required")
    _refuse_alt_names(req, "emails", "uris")
    if list(req.organizations) != ["system:nodes"]:
        raise RequestRejectedError("subject organization is not system:nodes")
    if not req.common_name.startswith("system:node:"):
        raise RequestRejectedError("subject common name does not begin with system:node:")


def check_for_signer(signer: str, req: ParsedRequest, usages: list[str]) -> bool:
    """True when the in-tree signer handles `signer`; RequestRejectedError when it refuses."""
    if signer == CLIENT_SIGNER:
        check_api_server_client(usages)
    elif signer == KUBELET_CLIENT_SIGNER:
        check_kubelet_client(req, usages)
    elif signer == KUBELET_SERVING_SIGNER:
        check_kubelet_serving(req, usages)
    elif signer != LEGACY_UNKNOWN_SIGNER:
        return False
    return True


# Karmada's agent CSR rules (karmada-controller-manager agentcsrapproving).
AGENT_GROUP = "system:karmada:agents"
AGENT_CN_PREFIX = "system:karmada:agent:"
_AGENT_USAGES = (
    {"digital signature", "key encipherment", "client auth"},
    {"digital signature", "client auth"},
)


def check_agent_request(req: ParsedRequest, usages: list[str]) -> None:
    if list(req.organizations) != [AGENT_GROUP]:
        raise RequestRejectedError("subject organization is not system:karmada:agents")
    # Karmada writes "email" where kube's signers write "Email".
    _refuse_alt_names(req, "dns_names", "emails", "ips", "uris", email="email")
    if not req.common_name.startswith(AGENT_CN_PREFIX):
        raise RequestRejectedError(
            "subject common name does not begin with system:karmada:agent: prefix"
        )
    if set(usages) not in _AGENT_USAGES:
        raise RequestRejectedError(
            "usages did not match [client auth digital signature key encipherment]"
        )
