"""csrsigning and Karmada's agent CSR approver, driven through a fake Loopback."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509

from emulator.controllers import Knobs, agent_csr_approver, csr_signer
from emulator.controllers.csr_signer import signing_duration
from emulator.pki import build_csr

from .fake_api import FakeApi, Running, eventually, make_ctx

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def csr_body(
    name: str,
    cn: str = "system:karmada:agent:member1",
    orgs: tuple[str, ...] = ("system:karmada:agents",),
    *,
    signer: str = "kubernetes.io/kube-apiserver-client",
    usages: tuple[str, ...] = ("digital signature", "key encipherment", "client auth"),
    username: str = "system:bootstrap:abcdef",
    groups: tuple[str, ...] = (
        "system:bootstrappers",
        "system:bootstrappers:karmada:default-cluster-token",
    ),
    dns: tuple[str, ...] = (),
    expiration: int | None = None,
) -> dict[str, Any]:
    pem, _key = build_csr(cn, orgs, dns_names=dns)
    spec: dict[str, Any] = {
        "request": base64.b64encode(pem).decode(),
        "signerName": signer,
        "usages": list(usages),
        "username": username,
        "groups": list(groups),
    }
    if expiration is not None:
        spec["expirationSeconds"] = expiration
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": spec,
    }


def approved(body: dict[str, Any]) -> dict[str, Any]:
    body["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Test"}]}
    return body


async def add(api: FakeApi, body: dict[str, Any]) -> None:
    status = body.pop("status", None)
    created = await api.create(CSRS, body)
    if status:
        created["status"] = status
        await api.update(f"{CSRS}/{body['metadata']['name']}/approval", created)


def certificate(api: FakeApi, name: str) -> x509.Certificate | None:
    obj = api.stored(f"{CSRS}/{name}")
    data = (obj or {}).get("status", {}).get("certificate")
    return x509.load_pem_x509_certificate(base64.b64decode(data)) if data else None


def test_signing_duration_floor_and_cap() -> None:
    knobs = Knobs(csr_max_duration=timedelta(days=365))
    assert signing_duration(knobs, None) == timedelta(days=365)
    assert signing_duration(knobs, 60) == timedelta(minutes=10)
    assert signing_duration(knobs, 3600) == timedelta(hours=1)
    assert signing_duration(knobs, 10 * 365 * 86400) == timedelta(days=365)


async def test_signer_signs_approved_client_csr_with_requested_lifetime() -> None:
    api = FakeApi()
    ctx = make_ctx(api)
    async with Running(csr_signer.run(ctx)):
        await add(api, approved(csr_body("agent", expiration=7200)))
        await add(api, csr_body("pending"))
        cert = await eventually(lambda: certificate(api, "agent"))
    remaining = cert.not_valid_after_utc - datetime.now(UTC)
    # Short certificates end at now + duration; NotBefore is backdated as kube does.
    assert timedelta(hours=2) - timedelta(minutes=1) <= remaining <= timedelta(hours=2)
    assert (
        cert.subject.rfc4514_string() == "CN=system:karmada:agent:member1,O=system:karmada:agents"
    )
    assert certificate(api, "pending") is None


async def test_signer_marks_bad_usages_failed_and_skips_denied() -> None:
    api = FakeApi()
    ctx = make_ctx(api)
    denied = csr_body("denied")
    denied["status"] = {
        "conditions": [{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]
    }
    async with Running(csr_signer.run(ctx)):
        await add(api, approved(csr_body("server", usages=("digital signature", "server auth"))))
        await add(api, denied)
        await add(
            api, approved(csr_body("kubelet", signer="kubernetes.io/kube-apiserver-client-kubelet"))
        )
        failed = await eventually(
            lambda: [
                c
                for c in (api.stored(f"{CSRS}/server") or {})
                .get("status", {})
                .get("conditions", [])
                if c["type"] == "Failed"
            ]
        )
        kubelet_failed = await eventually(
            lambda: [
                c
                for c in (api.stored(f"{CSRS}/kubelet") or {})
                .get("status", {})
                .get("conditions", [])
                if c["type"] == "Failed"
            ]
        )
    assert failed[0]["reason"] == "SignerValidationFailure"
    assert failed[0]["message"] == "invalid usage for client certificate: server auth"
    assert kubelet_failed[0]["message"] == "subject organization is not system:nodes"
    assert certificate(api, "server") is None
    assert certificate(api, "denied") is None


def conditions(api: FakeApi, name: str) -> list[dict[str, Any]]:
    return list((api.stored(f"{CSRS}/{name}") or {}).get("status", {}).get("conditions") or [])


async def test_approver_approves_bootstrap_csr_after_sar() -> None:
    api = FakeApi()
    api.sar_allowed = lambda spec: spec["resourceAttributes"]["subresource"] == "clusteragent"
    ctx = make_ctx(api)
    async with Running(agent_csr_approver.run(ctx)):
        await add(api, csr_body("bootstrap"))
        approved_conditions = await eventually(lambda: conditions(api, "bootstrap"))
    assert approved_conditions[0]["type"] == "Approved"
    assert approved_conditions[0]["reason"] == "AutoApproved"
    assert approved_conditions[0]["message"] == (
        "Auto approving karmada agent certificate after SubjectAccessReview."
    )
    review = api.sar_requests[-1]
    assert review["user"] == "system:bootstrap:abcdef"
    assert review["groups"] == [
        "system:bootstrappers",
        "system:bootstrappers:karmada:default-cluster-token",
    ]
    assert review["resourceAttributes"] == {
        "group": "certificates.k8s.io",
        "resource": "certificatesigningrequests",
        "verb": "create",
        "subresource": "clusteragent",
        "version": "*",
    }
    assert ("update", f"{CSRS}/bootstrap/approval") in api.calls


async def test_approver_uses_selfclusteragent_for_rotation() -> None:
    api = FakeApi()
    api.sar_allowed = lambda spec: spec["resourceAttributes"]["subresource"] == "selfclusteragent"
    ctx = make_ctx(api)
    async with Running(agent_csr_approver.run(ctx)):
        await add(
            api,
            csr_body(
                "rotate",
                username="system:karmada:agent:member1",
                groups=("system:karmada:agents", "system:authenticated"),
            ),
        )
        approved_conditions = await eventually(lambda: conditions(api, "rotate"))
    assert approved_conditions[0]["message"] == (
        "Auto approving self karmada agent certificate after SubjectAccessReview."
    )
    assert api.sar_requests[0]["resourceAttributes"]["subresource"] == "selfclusteragent"


async def test_approver_leaves_non_agent_csrs_pending() -> None:
    api = FakeApi()
    api.sar_allowed = lambda _spec: True
    ctx = make_ctx(api)
    async with Running(agent_csr_approver.run(ctx)):
        await add(api, csr_body("other-cn", cn="system:node:n1"))
        await add(api, csr_body("extra-org", orgs=("system:karmada:agents", "other")))
        await add(api, csr_body("san", dns=("evil.example.com",)))
        await add(api, csr_body("usages", usages=("client auth",)))
        await add(api, csr_body("signer", signer="kubernetes.io/kube-apiserver-client-kubelet"))
        await add(api, csr_body("valid"))
        # The last one is approved, so every earlier one has been looked at.
        await eventually(lambda: conditions(api, "valid"))
    for name in ("other-cn", "extra-org", "san", "usages", "signer"):
        assert conditions(api, name) == [], name
    assert len(api.sar_requests) == 1


async def test_approver_leaves_csr_pending_when_sar_denies() -> None:
    api = FakeApi()
    api.sar_allowed = lambda _spec: False
    ctx = make_ctx(api)
    async with Running(agent_csr_approver.run(ctx)):
        await add(api, csr_body("nope"))
        await eventually(lambda: api.sar_requests)
    # Only the bootstrap recogniser matches (the requester is not the certificate's subject).
    assert [r["resourceAttributes"]["subresource"] for r in api.sar_requests] == ["clusteragent"]
    assert conditions(api, "nope") == []
