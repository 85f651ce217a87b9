"""csrsigning and Karmada's agent CSR approver, on the emulator's API server."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509

from emulator.controllers import Knobs, agent_csr_approver, csr_signer, seed
from emulator.controllers.csr_signer import signing_duration
from emulator.pki import build_csr

from .harness import ControlPlane, Running, eventually

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
BOOTSTRAPPERS = "system:bootstrappers"


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


def approved(body: dict[str, Any], decision: str = "Approved") -> dict[str, Any]:
    body["status"] = {"conditions": [{"type": decision, "status": "True", "reason": "Test"}]}
    return body


async def add(plane: ControlPlane, body: dict[str, Any]) -> None:
    """Create the CSR as its requester (the server writes spec.username and groups from the
    requesting user), then approve or deny it as the admin, if the body says so."""
    status = body.pop("status", None)
    spec = body["spec"]
    requester = plane.as_user(spec.pop("username"), tuple(spec.pop("groups")))
    created = await requester.create(CSRS, body)
    if status:
        created["status"] = status
        await plane.api.update(f"{CSRS}/{body['metadata']['name']}/approval", created)


async def karmada(*, rbac: bool = True) -> ControlPlane:
    """A Karmada control plane; with `rbac`, seeded as karmadactl init does (the bootstrap
    group may create CSRs and is allowed the clusteragent approval, the agents group the
    selfclusteragent one)."""
    plane = ControlPlane("karmada")
    if rbac:
        await plane.seed(plane.ctx)
    else:
        await seed.seed_common(plane.ctx)
        await plane.api.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": "bootstrappers-may-request"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:node-bootstrapper",
                },
                "subjects": [
                    {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Group",
                        "name": BOOTSTRAPPERS,
                    }
                ],
            },
        )
    return plane


async def let_agent_request_csrs(plane: ControlPlane, user: str) -> None:
    """What the agent's own RBAC (deploy/control-plane) gives it: creating CSRs."""
    await plane.api.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": f"{user}-csr"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:node-bootstrapper",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )


def certificate(plane: ControlPlane, name: str) -> x509.Certificate | None:
    obj = plane.stored(f"{CSRS}/{name}")
    data = (obj or {}).get("status", {}).get("certificate")
    return x509.load_pem_x509_certificate(base64.b64decode(data)) if data else None


def test_signing_duration_floor_and_cap() -> None:
    knobs = Knobs(csr_max_duration=timedelta(days=365))
    assert signing_duration(knobs, None) == timedelta(days=365)
    assert signing_duration(knobs, 60) == timedelta(minutes=10)
    assert signing_duration(knobs, 3600) == timedelta(hours=1)
    assert signing_duration(knobs, 10 * 365 * 86400) == timedelta(days=365)


async def test_signer_signs_approved_client_csr_with_requested_lifetime() -> None:
    plane = await karmada()
    async with Running(csr_signer.run(plane.ctx)):
        await add(plane, approved(csr_body("agent", expiration=7200)))
        await add(plane, csr_body("pending"))
        cert = await eventually(lambda: certificate(plane, "agent"))
    remaining = cert.not_valid_after_utc - datetime.now(UTC)
    # Short certificates end at now + duration; NotBefore is backdated as kube does.
    assert timedelta(hours=2) - timedelta(minutes=1) <= remaining <= timedelta(hours=2)
    assert (
        cert.subject.rfc4514_string() == "CN=system:karmada:agent:member1,O=system:karmada:agents"
    )
    assert certificate(plane, "pending") is None


async def test_signer_marks_bad_usages_failed_and_skips_denied() -> None:
    plane = await karmada()
    async with Running(csr_signer.run(plane.ctx)):
        await add(plane, approved(csr_body("server", usages=("digital signature", "server auth"))))
        # A denied CSR (the API allows Approved or Denied, never both).
        await add(plane, approved(csr_body("denied"), "Denied"))
        await add(
            plane,
            approved(csr_body("kubelet", signer="kubernetes.io/kube-apiserver-client-kubelet")),
        )
        failed = await eventually(lambda: failed_conditions(plane, "server"))
        kubelet_failed = await eventually(lambda: failed_conditions(plane, "kubelet"))
    assert failed[0]["reason"] == "SignerValidationFailure"
    assert failed[0]["message"] == "invalid usage for client certificate: server auth"
    assert kubelet_failed[0]["message"] == "subject organization is not system:nodes"
    assert certificate(plane, "server") is None
    assert certificate(plane, "denied") is None
    # The signer wrote nothing to the denied CSR.
    assert plane.calls("update", f"{CSRS}/denied/status") == 0


def conditions(plane: ControlPlane, name: str) -> list[dict[str, Any]]:
    return list((plane.stored(f"{CSRS}/{name}") or {}).get("status", {}).get("conditions") or [])


def failed_conditions(plane: ControlPlane, name: str) -> list[dict[str, Any]]:
    return [c for c in conditions(plane, name) if c["type"] == "Failed"]


async def test_approver_approves_bootstrap_csr_after_sar() -> None:
    plane = await karmada()
    async with Running(agent_csr_approver.run(plane.ctx)):
        await add(plane, csr_body("bootstrap"))
        approved_conditions = await eventually(lambda: conditions(plane, "bootstrap"))
    assert approved_conditions[0]["type"] == "Approved"
    assert approved_conditions[0]["reason"] == "AutoApproved"
    assert approved_conditions[0]["message"] == (
        "Auto approving karmada agent certificate after SubjectAccessReview."
    )
    review = plane.reviews()[-1]
    assert review["user"] == "system:bootstrap:abcdef"
    assert review["groups"] == [
        "system:bootstrappers",
        "system:bootstrappers:karmada:default-cluster-token",
        "system:authenticated",
    ]
    assert review["resourceAttributes"] == {
        "group": "certificates.k8s.io",
        "resource": "certificatesigningrequests",
        "verb": "create",
        "subresource": "clusteragent",
        "version": "*",
    }
    assert plane.calls("update", f"{CSRS}/bootstrap/approval") == 1


async def test_approver_uses_selfclusteragent_for_rotation() -> None:
    plane = await karmada()
    await let_agent_request_csrs(plane, "system:karmada:agent:member1")
    async with Running(agent_csr_approver.run(plane.ctx)):
        await add(
            plane,
            csr_body(
                "rotate",
                username="system:karmada:agent:member1",
                groups=("system:karmada:agents", "system:authenticated"),
            ),
        )
        approved_conditions = await eventually(lambda: conditions(plane, "rotate"))
    assert approved_conditions[0]["message"] == (
        "Auto approving self karmada agent certificate after SubjectAccessReview."
    )
    assert plane.reviews()[0]["resourceAttributes"]["subresource"] == "selfclusteragent"


async def test_approver_leaves_non_agent_csrs_pending() -> None:
    plane = await karmada()
    async with Running(agent_csr_approver.run(plane.ctx)):
        await add(plane, csr_body("other-cn", cn="system:node:n1"))
        await add(plane, csr_body("extra-org", orgs=("system:karmada:agents", "other")))
        await add(plane, csr_body("san", dns=("evil.example.com",)))
        await add(plane, csr_body("usages", usages=("client auth",)))
        await add(plane, csr_body("signer", signer="kubernetes.io/kube-apiserver-client-kubelet"))
        await add(plane, csr_body("valid"))
        # The last one is approved, so every earlier one has been looked at.
        await eventually(lambda: conditions(plane, "valid"))
    for name in ("other-cn", "extra-org", "san", "usages", "signer"):
        assert conditions(plane, name) == [], name
    assert len(plane.reviews()) == 1


async def test_approver_leaves_csr_pending_when_sar_denies() -> None:
    # The bootstrap group may request CSRs, but nothing allows it the clusteragent approval.
    plane = await karmada(rbac=False)
    async with Running(agent_csr_approver.run(plane.ctx)):
        await add(plane, csr_body("nope"))
        await eventually(plane.reviews)
    # Only the bootstrap recogniser matches (the requester is not the certificate's subject).
    assert [r["resourceAttributes"]["subresource"] for r in plane.reviews()] == ["clusteragent"]
    assert conditions(plane, "nope") == []
