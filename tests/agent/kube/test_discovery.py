from __future__ import annotations

import httpx
import pytest

from agent.kube.discovery import NoKindMatchError, RESTMapper, api_enablements, discover
from tests.agent.kube.fakeapi import FakeApi, make_client

AGG_CORE = {
    "kind": "APIGroupDiscoveryList",
    "items": [
        {
            "metadata": {"name": ""},
            "versions": [
                {
                    "version": "v1",
                    "resources": [
                        {
                            "resource": "pods",
                            "responseKind": {"kind": "Pod"},
                            "scope": "Namespaced",
                            "verbs": ["get"],
                            "subresources": [{"subresource": "status"}],
                        },
                        {"resource": "nodes", "responseKind": {"kind": "Node"}, "scope": "Cluster"},
                    ],
                }
            ],
        }
    ],
}


def agg_groups(with_crd: bool) -> dict[str, object]:
    items = [
        {
            "metadata": {"name": "apps"},
            "versions": [
                {
                    "version": "v1",
                    "resources": [
                        {
                            "resource": "deployments",
                            "responseKind": {"kind": "Deployment"},
                            "scope": "Namespaced",
                        }
                    ],
                }
            ],
        }
    ]
    if with_crd:
        items.append(
            {
                "metadata": {"name": "example.io"},
                "versions": [
                    {
                        "version": "v1",
                        "freshness": "Current",
                        "resources": [
                            {
                                "resource": "widgets",
                                "responseKind": {"kind": "Widget"},
                                "scope": "Cluster",
                            }
                        ],
                    }
                ],
            }
        )
    return {"kind": "APIGroupDiscoveryList", "items": items}


async def test_aggregated_discovery_and_refresh_on_miss() -> None:
    api = FakeApi(routes={"/api": AGG_CORE, "/apis": agg_groups(False)})
    mapper = RESTMapper(make_client(api), min_refresh_interval=0)
    pod = await mapper.resource_for("v1", "Pod")
    assert (pod.resource, pod.namespaced, pod.subresources) == ("pods", True, ("status",))
    assert not (await mapper.resource_for("v1", "Node")).namespaced
    assert mapper.refreshes == 1
    assert "apidiscovery.k8s.io;v=v2" in api.calls[0].headers["accept"]
    with pytest.raises(NoKindMatchError):
        await mapper.resource_for("example.io/v1", "Widget")
    api.routes["/apis"] = agg_groups(True)  # the CRD is established later
    widget = await mapper.resource_for("example.io/v1", "Widget")
    assert widget.gvr.path(None, "w") == "/apis/example.io/v1/widgets/w"
    assert mapper.refreshes == 3


async def test_legacy_discovery_with_partial_failure_and_enablements() -> None:
    api = FakeApi(
        routes={
            "/api": {"kind": "APIVersions", "versions": ["v1"]},
            "/apis": {
                "kind": "APIGroupList",
                "groups": [
                    {"name": "apps", "versions": [{"groupVersion": "apps/v1"}]},
                    {
                        "name": "metrics.k8s.io",
                        "versions": [{"groupVersion": "metrics.k8s.io/v1beta1"}],
                    },
                ],
            },
            "/api/v1": {
                "resources": [
                    {"name": "pods", "kind": "Pod", "namespaced": True},
                    {"name": "pods/status", "kind": "Pod", "namespaced": True},
                    {"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
                ]
            },
            "/apis/apps/v1": {
                "resources": [{"name": "deployments", "kind": "Deployment", "namespaced": True}]
            },
        }
    )
    api.interceptors.append(lambda c: httpx.Response(503, json={}) if "metrics" in c.path else None)
    result = await discover(make_client(api))
    assert list(result.failed) == ["metrics.k8s.io/v1beta1"]
    assert api_enablements(result) == [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {
            "groupVersion": "v1",
            "resources": [
                {"name": "configmaps", "kind": "ConfigMap"},
                {"name": "pods", "kind": "Pod"},
            ],
        },
    ]
    assert result.resources["v1"][0].subresources == ("status",)
