"""The subjectAltName rules of kube's kubelet signers and of Karmada's agent CSR approver."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from emulator.controllers.csr_rules import (
    ParsedRequest,
    RequestRejectedError,
    check_agent_request,
    check_kubelet_client,
    check_kubelet_serving,
)

CLIENT_USAGES = ["digital signature", "key encipherment", "client auth"]
SERVING_USAGES = ["digital signature", "key encipherment", "server auth"]
Check = Callable[[ParsedRequest, list[str]], None]


def request(cn: str, org: str, **alt_names: tuple[str, ...]) -> ParsedRequest:
    names = {kind: alt_names.get(kind, ()) for kind in ("dns_names", "emails", "ips", "uris")}
    return ParsedRequest(pem="", common_name=cn, organizations=(org,), **names)


NODE = ("system:node:n1", "system:nodes")
AGENT = ("system:karmada:agent:member1", "system:karmada:agents")


@pytest.mark.parametrize(
    ("check", "subject", "usages", "alt_names", "message"),
    [
        (check_kubelet_client, NODE, CLIENT_USAGES, {"dns_names": ("n1",)}, "DNS"),
        (check_kubelet_client, NODE, CLIENT_USAGES, {"emails": ("a@b",)}, "Email"),
        (check_kubelet_client, NODE, CLIENT_USAGES, {"ips": ("10.0.0.1",)}, "IP"),
        (check_kubelet_client, NODE, CLIENT_USAGES, {"uris": ("spiffe://x",)}, "URI"),
        # The first one found is reported, in kube's order.
        (check_kubelet_client, NODE, CLIENT_USAGES, {"ips": ("1.2.3.4",), "uris": ("u",)}, "IP"),
        (
            check_kubelet_serving,
            NODE,
            SERVING_USAGES,
            {"dns_names": ("n1",), "emails": ("a@b",)},
            "Email",
        ),
        (
            check_kubelet_serving,
            NODE,
            SERVING_USAGES,
            {"ips": ("10.0.0.1",), "uris": ("u",)},
            "URI",
        ),
        (check_agent_request, AGENT, CLIENT_USAGES, {"dns_names": ("m1",)}, "DNS"),
        (check_agent_request, AGENT, CLIENT_USAGES, {"emails": ("a@b",)}, "email"),
        (check_agent_request, AGENT, CLIENT_USAGES, {"ips": ("10.0.0.1",)}, "IP"),
        (check_agent_request, AGENT, CLIENT_USAGES, {"uris": ("spiffe://x",)}, "URI"),
    ],
)
def test_refused_subject_alt_names(
    check: Check,
    subject: tuple[str, str],
    usages: list[str],
    alt_names: dict[str, tuple[str, ...]],
    message: str,
) -> None:
    with pytest.raises(RequestRejectedError) as refused:
        check(request(*subject, **alt_names), usages)
    assert str(refused.value) == f"{message} subjectAltNames are not allowed"


def test_allowed_requests_pass() -> None:
    check_kubelet_client(request(*NODE), CLIENT_USAGES)
    check_kubelet_serving(request(*NODE, dns_names=("n1",), ips=("10.0.0.1",)), SERVING_USAGES)
    check_agent_request(request(*AGENT), CLIENT_USAGES)
