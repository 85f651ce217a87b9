"""cluster.karmada.io aggregated: the Karmada control-plane emulator stops serving Clusters
itself, every client's Cluster requests go to the aggregated API server, and its own
controllers read Clusters there (here the aggregated server is another Karmada emulator, a
stand-in for karmada-aggregated-apiserver)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulator.upstream import KarmadaAggregatedApiserver
from emulator.wire import ApiRequest, ApiResponse
from tests import polling
from tests.e2e.support import kubectl

from .harness import APISERVICES, CLUSTERS_APISERVICE, aggregate_clusters, aggregated

CLUSTERS = "/apis/cluster.karmada.io/v1alpha1/clusters"


def cluster(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": "Pull"},
    }


async def test_clusters_live_in_the_aggregated_server_while_it_serves_them(tmp_path: Path) -> None:
    service = KarmadaAggregatedApiserver.SERVICE_DNS_NAME
    async with (
        aggregated("karmada", "karmada", widgets=False, service=service) as bed,
        bed.front.client() as front,
        bed.backend.client() as backend,
    ):
        (await front.post(CLUSTERS, json=cluster("kept-locally"))).raise_for_status()
        await aggregate_clusters(bed)
        assert bed.front.api.registry.lookup("cluster.karmada.io", "v1alpha1", "clusters") is None
        listed = await front.get(CLUSTERS)
        assert (listed.status_code, listed.json()["items"]) == (200, [])
        created = await front.post(CLUSTERS, json=cluster("edge-1"))
        assert created.status_code == 201, created.text
        uid = created.json()["metadata"]["uid"]
        assert bed.front.api.storage.get(("cluster.karmada.io", "clusters"), "", "edge-1") is None
        assert (await backend.get(f"{CLUSTERS}/edge-1")).json()["metadata"]["uid"] == uid
        # The control plane's cluster controller reads Clusters through the API now: it
        # makes the execution namespace and puts its finalizer on the aggregated object.
        await polling.eventually(
            lambda: front.get("/api/v1/namespaces/karmada-es-edge-1"),
            until=lambda r: r.status_code == 200,
            what="the execution namespace",
        )
        await polling.eventually(
            lambda: backend.get(f"{CLUSTERS}/edge-1"),
            until=lambda r: (
                "karmada.io/cluster-controller" in (r.json()["metadata"].get("finalizers") or [])
            ),
            what="the controller's finalizer on the aggregated Cluster",
        )
        # A Work owned by the aggregated Cluster is not garbage: its owner lives elsewhere.
        # (A second Work whose owner is a missing ConfigMap is; once the garbage collector
        # took that one, which it handles after the first, it has judged the first.)
        works = "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-edge-1/works"
        owners = {
                "owned": {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                          "name": "edge-1", "uid": uid},
                "dangling": {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
                             "uid": "00000000-0000-0000-0000-000000000000"},
            }  # fmt: skip
        for name, owner in owners.items():
            work = {
                "apiVersion": "work.karmada.io/v1alpha1",
                "kind": "Work",
                "metadata": {"name": name, "ownerReferences": [owner]},
                "spec": {"workload": {"manifests": []}},
            }
            (await front.post(works, json=work)).raise_for_status()
        await polling.eventually(
            lambda: front.get(f"{works}/dangling"),
            until=lambda r: r.status_code == 404,
            what="the garbage collector at work",
        )
        kept = await front.get(f"{works}/owned")
        assert kept.status_code == 200
        assert "deletionTimestamp" not in kept.json()["metadata"]
        config = bed.front.write_kubeconfig(tmp_path / "admin")
        table = await kubectl(config, "get", "clusters")
        assert [line.split()[0] for line in table.splitlines()] == ["NAME", "edge-1"]
        # OpenAPI v3 of the group comes from the aggregated server: kubectl explain finds it.
        root = (await front.get("/openapi/v3")).json()["paths"]
        assert (
            root["apis/cluster.karmada.io/v1alpha1"]
            == (
                (await backend.get("/openapi/v3")).json()["paths"][
                    "apis/cluster.karmada.io/v1alpha1"
                ]
            )
        )
        explained = await kubectl(config, "explain", "clusters")
        assert "GROUP:      cluster.karmada.io" in explained
        assert "KIND:       Cluster" in explained
        # The APIService goes: the emulator serves Clusters itself again, as before.
        (await front.delete(f"{APISERVICES}/{CLUSTERS_APISERVICE}")).raise_for_status()
        names = await polling.eventually(
            lambda: front.get(CLUSTERS),
            until=lambda r: (
                r.status_code == 200
                and [i["metadata"]["name"] for i in r.json()["items"]] == ["kept-locally"]
            ),
            what="the local Clusters back",
        )
        assert names.status_code == 200


PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


async def test_a_metadata_only_get_of_an_aggregated_cluster_carries_its_own_length() -> None:
    """The agent's heartbeat reads its Cluster metadata-only. The backend answers that itself;
    an answer re-encoded on the way must carry the length of what is sent (it was one byte
    short of its Content-Length, and HTTP/2 clients dropped the connection)."""
    service = KarmadaAggregatedApiserver.SERVICE_DNS_NAME
    async with aggregated("karmada", "karmada", widgets=False, service=service) as bed:
        bed.backend.api.response_hooks.append(_as_go_encodes)
        await aggregate_clusters(bed)
        async with bed.front.client() as front:
            (await front.post(CLUSTERS, json=cluster("edge-1"))).raise_for_status()
        for http2 in (False, True):
            async with bed.front.https_client(http2=http2) as client:
                response = await client.get(f"{CLUSTERS}/edge-1", headers={"Accept": PARTIAL})
            assert response.status_code == 200, response.text
            assert response.headers["content-length"] == str(len(response.content))
            partial = response.json()
            assert (partial["kind"], partial["apiVersion"]) == (
                "PartialObjectMetadata",
                "meta.k8s.io/v1",
            )
            assert partial["metadata"]["name"] == "edge-1"
            assert "spec" not in partial


def _as_go_encodes(_: ApiRequest, response: ApiResponse) -> None:
    """karmada-aggregated-apiserver's JSON ends with a newline (Go's json.Encoder)."""
    if response.stream is None and response.body.startswith(b"{"):
        response.body += b"\n"
