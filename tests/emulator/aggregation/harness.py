"""A front emulator with its aggregation layer, and a backend emulator serving as an aggregated
API server behind it.

The backend configures its front-proxy trust from the front's published
kube-system/extension-apiserver-authentication, as an aggregated API server does, and its
certificate names the Service (`sample-apiserver.samples.svc`). It serves the CRD group
samples.example.io (Widgets). `register` does what an installer does on the front: the Service,
its address in the ServiceNetwork, the APIService with the backend's CA.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from emulator.controllers import Knobs
from emulator.emulator import Emulator, run_emulator
from emulator.requestheader import RequestHeaderConfig
from emulator.upstream import (
    KarmadaAggregatedApiserver,
    aggregated_apiserver_apiservice,
    aggregated_apiserver_service,
)
from tests import polling

NAMESPACE, SERVICE = "samples", "sample-apiserver"
GROUP, VERSION = "samples.example.io", "v1"
APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
AUTH_CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
WIDGETS = f"/apis/{GROUP}/{VERSION}/namespaces/default/widgets"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {
            "kind": "Widget",
            "plural": "widgets",
            "singular": "widget",
            "shortNames": ["wd"],
        },
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


@dataclass
class Bed:
    front: Emulator
    backend: Emulator

    @property
    def backend_address(self) -> str:
        return self.backend.url.removeprefix("https://")


async def trust_of(front: Emulator) -> RequestHeaderConfig:
    """The front proxy an aggregated API server behind `front` trusts, read as such a server
    reads it: from the published ConfigMap."""
    async with front.client() as client:
        response = await client.get(AUTH_CONFIGMAP)
    response.raise_for_status()
    return RequestHeaderConfig.from_configmap(response.json()["data"])


@contextlib.asynccontextmanager
async def aggregated(
    front_profile: str = "member",
    backend_profile: str = "member",
    *,
    widgets: bool = True,
    service: str = f"{SERVICE}.{NAMESPACE}.svc",
) -> AsyncIterator[Bed]:
    """`service`: the name the backend's certificate is for."""
    knobs = Knobs(apiservice_resync=0.2)
    async with (
        run_emulator(front_profile, name="front", knobs=knobs) as front,
        run_emulator(
            backend_profile,
            name="backend",
            requestheader=await trust_of(front),
            serving_names=(service,),
        ) as backend,
    ):
        if widgets:
            async with backend.client() as client:
                created = await client.post(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=WIDGET_CRD
                )
                created.raise_for_status()
                await polling.eventually(
                    lambda: client.get(WIDGETS),
                    until=lambda r: r.status_code == 200,
                    what="the Widget CRD served",
                )
        yield Bed(front, backend)


def apiservice(
    group: str = GROUP,
    version: str = VERSION,
    *,
    ca_pem: bytes | None = None,
    insecure: bool = False,
    service: str = SERVICE,
    namespace: str = NAMESPACE,
    port: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "group": group,
        "version": version,
        "groupPriorityMinimum": 2000,
        "versionPriority": 10,
        "service": {"namespace": namespace, "name": service},
    }
    if port is not None:
        spec["service"]["port"] = port
    if ca_pem is not None:
        spec["caBundle"] = base64.b64encode(ca_pem).decode()
    if insecure:
        spec["insecureSkipTLSVerify"] = True
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}"},
        "spec": spec,
    }


async def create_service(
    front: httpx.AsyncClient, *, kind: str = "ExternalName", port: int = 443
) -> None:
    await front.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
    spec: dict[str, Any] = (
        {"type": "ExternalName", "externalName": f"{SERVICE}.{NAMESPACE}.svc.cluster.local"}
        if kind == "ExternalName"
        else {"type": "ClusterIP", "ports": [{"port": port, "targetPort": port}]}
    )
    created = await front.post(
        f"/api/v1/namespaces/{NAMESPACE}/services",
        json={"metadata": {"name": SERVICE}, "spec": spec},
    )
    created.raise_for_status()


async def register(bed: Bed, **kwargs: Any) -> dict[str, Any]:
    """Service, address and APIService (verified against the backend's CA) on the front; returns
    the APIService once Available."""
    bed.front.api.services[f"{NAMESPACE}/{SERVICE}"] = bed.backend_address
    async with bed.front.client() as front:
        await create_service(front)
        body = apiservice(ca_pem=bed.backend.ca_pem, **kwargs)
        (await front.post(APISERVICES, json=body)).raise_for_status()
        return await available(front, body["metadata"]["name"])


def condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    status = obj.get("status")
    for cond in status.get("conditions") or () if isinstance(status, dict) else ():
        if cond.get("type") == "Available":
            return dict(cond)
    return None


async def available(front: httpx.AsyncClient, name: str, status: str = "True") -> dict[str, Any]:
    async def current() -> dict[str, Any]:
        return dict((await front.get(f"{APISERVICES}/{name}")).json())

    return dict(
        await polling.eventually(
            current,
            until=lambda obj: (condition(obj) or {}).get("status") == status,
            what=f"APIService {name} Available={status}",
        )
    )


CLUSTERS_APISERVICE = "v1alpha1.cluster.karmada.io"


async def aggregate_clusters(bed: Bed) -> None:
    """Install on the front what Karmada's artifacts install on karmada-apiserver (the Service
    and the APIService of karmada-aggregated-apiserver), pointing at the backend, and wait until
    the APIService is Available."""
    bed.front.api.services[KarmadaAggregatedApiserver.SERVICE_KEY] = bed.backend_address
    service = aggregated_apiserver_service()
    async with bed.front.client() as front:
        namespace = service["metadata"]["namespace"]
        path = f"/api/v1/namespaces/{namespace}/services"
        (await front.post(path, json=service)).raise_for_status()
        apiservice = aggregated_apiserver_apiservice(bed.backend.ca_pem)
        (await front.post(APISERVICES, json=apiservice)).raise_for_status()
        await available(front, CLUSTERS_APISERVICE)
