from __future__ import annotations

import httpx
import pytest

from agent.kube.discovery import NoKindMatchError, RESTMapper, api_enablements, discover
from tests.agent.controllers.harness import crd
from tests.agent.kube.wire import emulated, wait_for


async def test_aggregated_discovery_and_refresh_on_miss() -> None:
    api = emulated()
    mapper = RESTMapper(api.client(), min_refresh_interval=0)
    pod = await mapper.resource_for("v1", "Pod")
    assert (pod.resource, pod.namespaced, pod.subresources) == ("pods", True, ("status",))
    assert not (await mapper.resource_for("v1", "Node")).namespaced
    assert mapper.refreshes == 1
    assert "apidiscovery.k8s.io;v=v2" in api.wire.calls[0].headers["accept"]
    with pytest.raises(NoKindMatchError):
        await mapper.resource_for("example.io/v1", "Widget")
    # The CRD is established later.
    await api.admin.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd())
    await wait_for(lambda: api.server.registry.lookup("example.io", "v1", "widgets") is not None)
    widget = await mapper.resource_for("example.io/v1", "Widget")
    assert widget.gvr.path(None, "w") == "/apis/example.io/v1/widgets/w"
    assert mapper.refreshes == 3


async def test_legacy_discovery_with_partial_failure_and_enablements() -> None:
    # A server older than aggregated discovery (1.26) with an aggregated API that is down:
    # answered on the wire, as the emulator serves aggregated discovery.
    api = emulated()
    legacy = {
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
    for path, body in legacy.items():
        api.wire.answer_at(path, body)
    api.wire.answers.append(lambda c: httpx.Response(503, json={}) if "metrics" in c.path else None)
    result = await discover(api.client())
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
