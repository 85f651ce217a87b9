"""Token controller, bootstrap signer (cluster-info JWS) and token cleaner."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from emulator.controllers import bootstrap_signer, seed, token_controller
from emulator.controllers.bootstrap_signer import detached_jws
from emulator.controllers.seed import cluster_info_kubeconfig

from .harness import ControlPlane, Running, eventually

SECRETS = "/api/v1/namespaces/ns1/secrets"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def token_secret(name: str, sa: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {"name": name, "annotations": {"kubernetes.io/service-account.name": sa}},
    }


async def member() -> ControlPlane:
    """A member cluster with its system namespaces and the namespace ns1."""
    plane = ControlPlane("member")
    await seed.seed_common(plane.ctx)
    await plane.namespace("ns1")
    return plane


async def test_token_controller_fills_secret_of_existing_service_account() -> None:
    plane = await member()
    api, ctx = plane.api, plane.ctx
    sa = await api.create(
        "/api/v1/namespaces/ns1/serviceaccounts", {"metadata": {"name": "karmada-member1"}}
    )
    async with Running(token_controller.run(ctx)):
        await api.create(SECRETS, token_secret("karmada-member1", "karmada-member1"))
        secret = await eventually(
            lambda: (plane.stored(f"{SECRETS}/karmada-member1") or {}).get("data")
        )
    stored = plane.stored(f"{SECRETS}/karmada-member1")
    assert stored is not None
    assert set(secret) == {"token", "ca.crt", "namespace"}
    assert base64.b64decode(secret["namespace"]) == b"ns1"
    assert base64.b64decode(secret["ca.crt"]) == ctx.ca.cert_pem
    claims = ctx.sa_tokens.verify(base64.b64decode(secret["token"]).decode())
    assert (claims.namespace, claims.name, claims.uid, claims.secret_name) == (
        "ns1",
        "karmada-member1",
        sa["metadata"]["uid"],
        "karmada-member1",
    )
    assert (
        stored["metadata"]["annotations"]["kubernetes.io/service-account.uid"]
        == sa["metadata"]["uid"]
    )


async def test_token_controller_deletes_orphan_and_follows_account_deletion() -> None:
    plane = await member()
    api, ctx = plane.api, plane.ctx
    await api.create("/api/v1/namespaces/ns1/serviceaccounts", {"metadata": {"name": "sa"}})
    async with Running(token_controller.run(ctx)):
        await api.create(SECRETS, token_secret("orphan", "missing"))
        await api.create(SECRETS, token_secret("owned", "sa"))
        await eventually(lambda: plane.stored(f"{SECRETS}/orphan") is None)
        await eventually(lambda: (plane.stored(f"{SECRETS}/owned") or {}).get("data"))
        await api.delete("/api/v1/namespaces/ns1/serviceaccounts/sa")
        await eventually(lambda: plane.stored(f"{SECRETS}/owned") is None)


def bootstrap_token(token_id: str, secret: str, **extra: str) -> dict[str, Any]:
    data = {
        "token-id": token_id,
        "token-secret": secret,
        "usage-bootstrap-signing": "true",
        "usage-bootstrap-authentication": "true",
        **extra,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": f"bootstrap-token-{token_id}"},
        "data": {k: b64(v) for k, v in data.items() if v},
    }


def verify_jws(jws: str, content: str, token_id: str, secret: str) -> bool:
    header_b64, payload, signature_b64 = jws.split(".")
    assert payload == ""
    header = json.loads(base64.urlsafe_b64decode(header_b64 + "=="))
    assert header == {"alg": "HS256", "kid": token_id}
    payload_b64 = base64.urlsafe_b64encode(content.encode()).rstrip(b"=").decode()
    expected = hmac.new(
        secret.encode(), f"{header_b64}.{payload_b64}".encode(), hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(expected).rstrip(b"=").decode() == signature_b64


def test_detached_jws_header_is_go_jose_form() -> None:
    jws = detached_jws("hello", "abcdef", "0123456789abcdef")
    # base64url of {"alg":"HS256","kid":"abcdef"}: keys sorted, no spaces.
    assert jws.startswith("eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9..")
    assert verify_jws(jws, "hello", "abcdef", "0123456789abcdef")
    assert not verify_jws(jws, "hello!", "abcdef", "0123456789abcdef")


def test_cluster_info_kubeconfig_has_one_unnamed_cluster() -> None:
    config = yaml.safe_load(cluster_info_kubeconfig("https://10.0.0.1:5443", b"PEM"))
    assert config["kind"] == "Config"
    assert config["clusters"] == [
        {
            "name": "",
            "cluster": {
                "server": "https://10.0.0.1:5443",
                "certificate-authority-data": b64("PEM"),
            },
        }
    ]


async def karmada() -> ControlPlane:
    """A control plane with its system namespaces and default RBAC (no cluster-info yet)."""
    plane = ControlPlane("karmada", name="karmada")
    await seed.seed_common(plane.ctx)
    return plane


async def test_bootstrap_signer_signs_valid_tokens_and_drops_others() -> None:
    plane = await karmada()
    api, ctx = plane.api, plane.ctx
    kubeconfig = cluster_info_kubeconfig(ctx.server_url, ctx.ca.cert_pem)
    await api.create(
        "/api/v1/namespaces/kube-public/configmaps",
        {"metadata": {"name": "cluster-info"}, "data": {"kubeconfig": kubeconfig}},
    )
    system = "/api/v1/namespaces/kube-system/secrets"
    past = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    soon = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def data() -> dict[str, str]:
        stored = plane.stored("/api/v1/namespaces/kube-public/configmaps/cluster-info") or {}
        return dict(stored["data"])

    async with Running(bootstrap_signer.run(ctx)):
        await api.create(system, bootstrap_token("aaaaaa", "aaaaaaaaaaaaaaaa"))
        await api.create(system, bootstrap_token("bbbbbb", "bbbbbbbbbbbbbbbb", expiration=past))
        await api.create(
            system, bootstrap_token("cccccc", "cccccccccccccccc", **{"usage-bootstrap-signing": ""})
        )
        await api.create(system, bootstrap_token("dddddd", "dddddddddddddddd", expiration=soon))
        await eventually(lambda: {"jws-kubeconfig-aaaaaa", "jws-kubeconfig-dddddd"} <= set(data()))
        assert set(data()) == {"kubeconfig", "jws-kubeconfig-aaaaaa", "jws-kubeconfig-dddddd"}
        assert verify_jws(data()["jws-kubeconfig-aaaaaa"], kubeconfig, "aaaaaa", "aaaaaaaaaaaaaaaa")
        # dddddd expires after a second: its signature goes without any other event.
        await eventually(lambda: "jws-kubeconfig-dddddd" not in data(), timeout=5)
        await api.delete(f"{system}/bootstrap-token-aaaaaa")
        await eventually(lambda: set(data()) == {"kubeconfig"})
    assert data()["kubeconfig"] == kubeconfig


async def test_token_cleaner_deletes_expired_tokens() -> None:
    plane = await karmada()
    api, ctx = plane.api, plane.ctx
    system = "/api/v1/namespaces/kube-system/secrets"
    past = (datetime.now(UTC) - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    async with Running(bootstrap_signer.run_token_cleaner(ctx)):
        await api.create(system, bootstrap_token("eeeeee", "eeeeeeeeeeeeeeee", expiration=past))
        await api.create(system, bootstrap_token("ffffff", "ffffffffffffffff"))
        await eventually(lambda: plane.stored(f"{system}/bootstrap-token-eeeeee") is None)
    assert plane.stored(f"{system}/bootstrap-token-ffffff") is not None
