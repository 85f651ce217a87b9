"""Registration against an emulated control plane and member (real HTTPS, agent.kube clients)."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from agent.options import Options
from agent.registration import (
    MemberCredentials,
    RegistrationError,
    check_unique,
    desired_cluster_spec,
    register,
    spec_patch,
)
from tests.agent.controllers.clusterenv import CLUSTERS_PATH, emulator_pair, kube_client

SECRETS = "/api/v1/namespaces/karmada-cluster/secrets"


def cluster(name: str, cluster_id: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {"id": cluster_id}}


def test_check_unique_rules() -> None:
    check_unique([cluster("member1", "id-1")], "member1", "id-1")  # restart
    check_unique([cluster("other", "id-2")], "member1", "id-1")
    with pytest.raises(RegistrationError, match="cluster name 'member1' has been registered"):
        check_unique([cluster("member1", "id-2")], "member1", "id-1")
    with pytest.raises(RegistrationError, match="already registered as Cluster 'member2'"):
        check_unique([cluster("member2", "id-1")], "member1", "id-1")
    # Same name without an id (a hand-made Cluster) is taken, as upstream.
    with pytest.raises(RegistrationError, match="its id is <none>"):
        check_unique([{"metadata": {"name": "member1"}, "spec": {}}], "member1", "id-1")


def test_desired_spec_only_sets_given_fields() -> None:
    options = Options(cluster_name="m1", report_secrets=())
    assert desired_cluster_spec(options, "uid") == {
        "syncMode": "Pull",
        "id": "uid",
        "insecureSkipTLSVerification": False,
    }
    options = Options(
        cluster_name="m1",
        cluster_api_endpoint="https://10.0.0.1:6443",
        proxy_server_address="http://proxy:3128",
        cluster_provider="aws",
        cluster_region="eu-west-1",
        cluster_zones=("a", "b"),
    )
    spec = desired_cluster_spec(options, "uid", member_proxy_url="socks5://p:1080")
    assert spec["proxyURL"] == "socks5://p:1080"  # the member kubeconfig's proxy wins
    assert spec["zones"] == ["a", "b"]
    assert spec["secretRef"] == {"namespace": "karmada-cluster", "name": "m1"}
    assert spec["impersonatorSecretRef"] == {
        "namespace": "karmada-cluster",
        "name": "m1-impersonator",
    }
    # Nothing to write when the live spec already has our values (absent bool == False).
    live = {**spec, "taints": [{"key": "x", "effect": "NoSchedule"}]}
    assert spec_patch(live, spec) == {}
    live.pop("insecureSkipTLSVerification")
    assert spec_patch(live, spec) == {}
    assert spec_patch({**live, "region": "old"}, spec) == {"region": "eu-west-1"}


def test_credentials_repr_hides_tokens() -> None:
    creds = MemberCredentials(ca_bundle="Y2E=", token="c2VjcmV0", impersonator_token="aW1w")
    assert "c2VjcmV0" not in repr(creds)
    assert "aW1w" not in repr(creds)


async def test_register_creates_cluster_secrets_and_member_credentials(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        options = pair.options(cluster_provider="kind", cluster_zones=("z1",))
        caplog.set_level(logging.DEBUG)
        result = await register(karmada, member, options, token_poll_interval=0.05)
        # Everything registration logged, messages and fields, as it was logged (not redacted).
        logs = [record.__dict__ for record in caplog.records]
        assert any("registered cluster member1" in record.getMessage() for record in caplog.records)

        kube_system = await pair.member_get("/api/v1/namespaces/kube-system")
        assert kube_system is not None
        assert result.cluster_id == kube_system["metadata"]["uid"]
        obj = await pair.cluster()
        assert obj is not None
        spec = obj["spec"]
        assert spec["id"] == result.cluster_id
        assert spec["syncMode"] == "Pull"
        assert spec["provider"] == "kind"
        assert spec["zones"] == ["z1"]
        assert spec["secretRef"] == {"namespace": "karmada-cluster", "name": "member1"}
        assert spec["impersonatorSecretRef"] == {
            "namespace": "karmada-cluster",
            "name": "member1-impersonator",
        }
        assert "region" not in spec
        assert "apiEndpoint" not in spec

        # Member side: namespace, SAs, RBAC, token Secrets, all labelled karmada.io/system.
        for path in (
            "/api/v1/namespaces/karmada-cluster",
            "/api/v1/namespaces/karmada-cluster/serviceaccounts/karmada-member1",
            "/api/v1/namespaces/karmada-cluster/serviceaccounts/karmada-impersonator",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/karmada-controller-manager:karmada-member1",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/karmada-controller-manager:karmada-member1",
        ):
            got = await pair.member_get(path)
            assert got is not None, path
            assert got["metadata"]["labels"]["karmada.io/system"] == "true", path
        member_secret = await pair.member_get(
            "/api/v1/namespaces/karmada-cluster/secrets/karmada-member1"
        )
        assert member_secret is not None
        assert member_secret["type"] == "kubernetes.io/service-account-token"

        # Control plane: namespace labelled, Secrets with the member's token and CA, owned.
        namespace = await pair.karmada_get("/api/v1/namespaces/karmada-cluster")
        assert namespace is not None
        assert namespace["metadata"]["labels"]["karmada.io/system"] == "true"
        reported = await pair.karmada_get(f"{SECRETS}/member1")
        impersonator = await pair.karmada_get(f"{SECRETS}/member1-impersonator")
        assert reported is not None
        assert impersonator is not None
        assert reported["data"]["token"] == member_secret["data"]["token"]
        assert reported["data"]["caBundle"] == member_secret["data"]["ca.crt"]
        assert base64.b64decode(reported["data"]["caBundle"]).startswith(b"-----BEGIN CERTIFICATE")
        assert set(impersonator["data"]) == {"token"}
        for secret in (reported, impersonator):
            (owner,) = secret["metadata"]["ownerReferences"]
            assert owner == {
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "name": "member1",
                "uid": obj["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        # No token ever reaches the logs.
        token_text = base64.b64decode(member_secret["data"]["token"]).decode()
        assert token_text not in repr(logs)
        assert member_secret["data"]["token"] not in repr(logs)


async def test_restart_is_accepted_and_does_not_rewrite_the_cluster(tmp_path: Path) -> None:
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        options = pair.options(report_secrets=())
        await register(karmada, member, options)
        # Another writer (karmada-controller-manager) sets taints; we must keep them.
        first = await pair.cluster()
        assert first is not None
        pair.karmada.accounting.reset()
        result = await register(karmada, member, options)
        assert result.cluster["metadata"]["uid"] == first["metadata"]["uid"]
        writes = sum(
            pair.karmada.accounting.counts(verb=verb, resource="clusters.cluster.karmada.io")
            for verb in ("create", "update", "patch")
        )
        assert writes == 0

        # A changed flag updates only that field; taints written by others survive.
        async with pair.karmada.client() as client:
            response = await client.patch(
                f"{CLUSTERS_PATH}/member1",
                json={"spec": {"taints": [{"key": "example.com/x", "effect": "NoSchedule"}]}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert response.status_code == 200, response.text
        await register(karmada, member, pair.options(report_secrets=(), cluster_region="r1"))
        updated = await pair.cluster()
        assert updated is not None
        assert updated["spec"]["region"] == "r1"
        assert {"key": "example.com/x", "effect": "NoSchedule"} in [
            {k: t[k] for k in ("key", "effect")} for t in updated["spec"]["taints"]
        ]


async def test_a_restart_registers_in_few_control_plane_reads_and_no_writes(
    tmp_path: Path,
) -> None:
    """Over a slow link every request to the control plane is a round trip: a restart with
    both Secrets reported reads what it needs once (the Clusters listed, the namespace, each
    Secret) and writes nothing when everything is as it should be."""
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        options = pair.options()
        await register(karmada, member, options, token_poll_interval=0.05)
        pair.karmada.accounting.reset()
        await register(karmada, member, options, token_poll_interval=0.05)
        requests = {
            (row["verb"], row.get("resource", row.get("path"))): row["count"]
            for row in pair.karmada.accounting.rows()
        }
        assert requests == {
            ("list", "clusters"): 1,
            ("get", "namespaces"): 1,
            ("get", "secrets"): 2,
        }


async def test_refuses_a_name_taken_by_another_cluster(tmp_path: Path) -> None:
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        async with pair.karmada.client() as client:
            response = await client.post(
                CLUSTERS_PATH,
                json={
                    "apiVersion": "cluster.karmada.io/v1alpha1",
                    "kind": "Cluster",
                    "metadata": {"name": "member1"},
                    "spec": {"syncMode": "Pull", "id": "someone-else"},
                },
            )
            assert response.status_code == 201, response.text
        with pytest.raises(RegistrationError) as caught:
            await register(karmada, member, pair.options(report_secrets=()))
        assert "cluster name 'member1' has been registered" in str(caught.value)
        assert "someone-else" in str(caught.value)
        assert not caught.value.retriable
        # Nothing was changed on the other cluster's object.
        obj = await pair.cluster()
        assert obj is not None
        assert obj["spec"]["id"] == "someone-else"


async def test_refuses_when_this_member_is_registered_under_another_name(tmp_path: Path) -> None:
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        await register(karmada, member, pair.options(report_secrets=(), cluster_name="first"))
        with pytest.raises(RegistrationError, match="already registered as Cluster 'first'"):
            await register(karmada, member, pair.options(report_secrets=(), cluster_name="second"))
        assert await pair.cluster("second") is None


async def test_forbidden_is_explained(tmp_path: Path) -> None:
    async with emulator_pair(tmp_path) as pair:
        # A user with no RBAC at all on the member.
        pair.member.write_kubeconfig(tmp_path / "nobody", user="nobody")
        async with (
            kube_client(pair.karmada_kubeconfig) as karmada,
            kube_client(tmp_path / "nobody") as member,
        ):
            with pytest.raises(RegistrationError) as caught:
                await register(karmada, member, pair.options())
        message = str(caught.value)
        assert "kube-system" in message
        assert "RBAC on the member" in message
