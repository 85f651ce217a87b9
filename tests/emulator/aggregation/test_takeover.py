"""cluster.karmada.io aggregated: the Karmada control-plane emulator stops serving Clusters
itself, every client's Cluster requests go to the aggregated API server, and its own
controllers read Clusters there (here the aggregated server is another Karmada emulator, a
stand-in for karmada-aggregated-apiserver)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests import polling
from tests.e2e.support import kubectl

from .harness import APISERVICES, aggregated, available

CLUSTERS = "/apis/cluster.karmada.io/v1alpha1/clusters"
NAME = "v1alpha1.cluster.karmada.io"


def cluster(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": "Pull"},
    }


async def aggregate_clusters(
    front: httpx.AsyncClient, address: str, ca_pem: bytes, bed: Any
) -> None:
    """What Karmada's artifacts install on karmada-apiserver: an ExternalName Service and the
    APIService (groupPriorityMinimum 2000, versionPriority 10) with the server's CA."""
    import base64

    bed.front.api.services["karmada-system/karmada-aggregated-apiserver"] = address
    service = {
        "metadata": {"name": "karmada-aggregated-apiserver"},
        "spec": {
            "type": "ExternalName",
            "externalName": "karmada-aggregated-apiserver.karmada-system.svc.cluster.local",
        },
    }
    (
        await front.post("/api/v1/namespaces/karmada-system/services", json=service)
    ).raise_for_status()
    body = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": NAME, "labels": {"app": "karmada-aggregated-apiserver"}},
        "spec": {
            "caBundle": base64.b64encode(ca_pem).decode(),
            "group": "cluster.karmada.io",
            "groupPriorityMinimum": 2000,
            "service": {"name": "karmada-aggregated-apiserver", "namespace": "karmada-system"},
            "version": "v1alpha1",
            "versionPriority": 10,
        },
    }
    (await front.post(APISERVICES, json=body)).raise_for_status()
    await available(front, NAME)


async def test_clusters_live_in_the_aggregated_server_while_it_serves_them(tmp_path: Path) -> None:
    service = "karmada-aggregated-apiserver.karmada-system.svc"
    async with (
        aggregated("karmada", "karmada", widgets=False, service=service) as bed,
        bed.front.client() as front,
        bed.backend.client() as backend,
    ):
        (await front.post(CLUSTERS, json=cluster("kept-locally"))).raise_for_status()
        await aggregate_clusters(front, bed.backend_address, bed.backend.ca_pem, bed)
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
        # The APIService goes: the emulator serves Clusters itself again, as before.
        (await front.delete(f"{APISERVICES}/{NAME}")).raise_for_status()
        names = await polling.eventually(
            lambda: front.get(CLUSTERS),
            until=lambda r: (
                r.status_code == 200
                and [i["metadata"]["name"] for i in r.json()["items"]] == ["kept-locally"]
            ),
            what="the local Clusters back",
        )
        assert names.status_code == 200
