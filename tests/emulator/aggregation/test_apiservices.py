"""APIService objects: served and validated as kube-aggregator serves them, the local ones a
kube-apiserver registers, and the Available condition (read with the real kubectl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulator.emulator import Emulator
from tests.e2e.support import kubectl

from .harness import (
    APISERVICES,
    NAMESPACE,
    SERVICE,
    aggregated,
    apiservice,
    available,
    condition,
    create_service,
    register,
)


async def test_the_local_apiservices_and_kubectl_get_apiservices(
    member_emulator: Emulator, tmp_path: Path
) -> None:
    config = member_emulator.write_kubeconfig(tmp_path / "admin")
    listed = json.loads(await kubectl(config, "get", "apiservices", "-o", "json"))
    names = {item["metadata"]["name"]: item for item in listed["items"]}
    assert {"v1.", "v1.apps", "v2.autoscaling", "v1.apiregistration.k8s.io"} <= set(names)
    apps = names["v1.apps"]
    assert apps["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    assert apps["spec"] == {
        "group": "apps",
        "version": "v1",
        "groupPriorityMinimum": 17800,
        "versionPriority": 15,
    }
    assert condition(apps) == {
        "type": "Available",
        "status": "True",
        "lastTransitionTime": condition(apps)["lastTransitionTime"],  # type: ignore[index]
        "reason": "Local",
        "message": "Local APIServices are always available",
    }
    table = await kubectl(config, "get", "apiservices")
    header, *rows = table.splitlines()
    assert header.split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    assert any(row.split()[:3] == ["v1.apps", "Local", "True"] for row in rows)


async def test_a_crd_group_version_gets_its_apiservice_and_loses_it(
    member_emulator: Emulator,
) -> None:
    from .harness import WIDGET_CRD

    async with member_emulator.client() as client:
        crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        (await client.post(crds, json=WIDGET_CRD)).raise_for_status()
        registered = await available(client, "v1.samples.example.io")
        assert registered["metadata"]["labels"] == {
            "kube-aggregator.kubernetes.io/automanaged": "true"
        }
        assert registered["spec"]["groupPriorityMinimum"] == 1000
        assert registered["spec"]["versionPriority"] == 100
        (await client.delete(f"{crds}/widgets.samples.example.io")).raise_for_status()
        from tests import polling

        await polling.eventually(
            lambda: client.get(f"{APISERVICES}/v1.samples.example.io"),
            until=lambda r: r.status_code == 404,
            what="the CRD's APIService deleted",
        )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"metadata": {"name": "v1.wrong"}},
            'metadata.name: Invalid value: "v1.wrong": must be `spec.version+"."+spec.group`: '
            '"v1.samples.example.io"',
        ),
        (
            {"spec": {"groupPriorityMinimum": 0}},
            "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
        ),
        (
            {"spec": {"versionPriority": 1001}},
            "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000",
        ),
        (
            {"spec": {"insecureSkipTLSVerify": True}},
            "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is "
            "present",
        ),
        (
            {"spec": {"service": {"name": "", "namespace": "samples"}, "caBundle": None}},
            "spec.service.name: Required value",
        ),
        (
            {"metadata": {"name": "v1beta1."}, "spec": {"group": "", "version": "v1beta1"}},
            "spec.group: Required value: only v1 may have an empty group and it better be "
            "legacy kube",
        ),
        (
            {"spec": {"service": None}},
            'spec.caBundle: Invalid value: "',
        ),
    ],
)
async def test_invalid_apiservices_are_refused_with_kubes_messages(
    member_emulator: Emulator, tmp_path: Path, change: dict[str, dict[str, object]], message: str
) -> None:
    body = apiservice(ca_pem=member_emulator.ca_pem)
    for part, fields in change.items():
        body[part].update(fields)
        body[part] = {k: v for k, v in body[part].items() if v is not None}
    manifest = tmp_path / "apiservice.json"
    manifest.write_text(json.dumps(body))
    config = member_emulator.write_kubeconfig(tmp_path / "admin")
    with pytest.raises(AssertionError) as failed:
        await kubectl(config, "create", "-f", str(manifest))
    assert "is invalid" in str(failed.value)
    assert message in str(failed.value)


async def test_the_port_defaults_to_443_and_a_create_starts_without_status(
    member_emulator: Emulator,
) -> None:
    body = apiservice(ca_pem=member_emulator.ca_pem)
    body["status"] = {"conditions": [{"type": "Available", "status": "True"}]}
    async with member_emulator.client() as client:
        created = (await client.post(APISERVICES, json=body)).json()
    assert created["spec"]["service"] == {"namespace": NAMESPACE, "name": SERVICE, "port": 443}
    assert "conditions" not in (created.get("status") or {})


async def test_availability_follows_the_service_its_address_and_the_backend() -> None:
    async with aggregated() as bed:
        name = "v1.samples.example.io"
        async with bed.front.client() as front:
            (
                await front.post(APISERVICES, json=apiservice(ca_pem=bed.backend.ca_pem))
            ).raise_for_status()
            missing = condition(await available(front, name, "False"))
            assert missing is not None
            assert (missing["reason"], missing["message"]) == (
                "ServiceNotFound",
                'service/sample-apiserver in "samples" is not present',
            )
            await create_service(front, kind="ClusterIP", port=8443)
            wrong_port = condition(await _reason(front, name, "ServicePortError"))
            assert wrong_port is not None
            assert (
                wrong_port["message"]
                == 'service/sample-apiserver in "samples" is not listening on port 443'
            )
            await front.delete(f"/api/v1/namespaces/{NAMESPACE}/services/{SERVICE}")
            await create_service(front, kind="ClusterIP", port=443)
            no_address = condition(await _reason(front, name, "EndpointsNotFound"))
            assert no_address is not None
            assert no_address["message"] == (
                'cannot find endpointslices for service/sample-apiserver in "samples"'
            )
            # Mapped to a port where nobody listens: the discovery check fails as Go words it.
            bed.front.api.services[f"{NAMESPACE}/{SERVICE}"] = "127.0.0.1:1"
            refused = condition(await _reason(front, name, "FailedDiscoveryCheck"))
            assert refused is not None
            url = "https://127.0.0.1:1/apis/samples.example.io/v1"
            assert refused["message"] == (
                f'failing or missing response from {url}: Get "{url}": '
                "dial tcp 127.0.0.1:1: connect: connection refused"
            )
            bed.front.api.services[f"{NAMESPACE}/{SERVICE}"] = bed.backend_address
            passed = condition(await available(front, name))
            assert passed is not None
            assert (passed["reason"], passed["message"]) == ("Passed", "all checks passed")
            # The backend goes away: the periodic check notices.
            await bed.backend.faults.go_offline()
            gone = condition(await _reason(front, name, "FailedDiscoveryCheck"))
            assert gone is not None
            assert gone["status"] == "False"
            assert gone["lastTransitionTime"] >= passed["lastTransitionTime"]
            await bed.backend.faults.come_back()
            await available(front, name)


async def _reason(front: object, name: str, reason: str) -> dict[str, object]:
    from tests import polling

    async def current() -> dict[str, object]:
        return dict((await front.get(f"{APISERVICES}/{name}")).json())  # type: ignore[attr-defined]

    return dict(
        await polling.eventually(
            current,
            until=lambda obj: (condition(obj) or {}).get("reason") == reason,
            what=f"reason {reason}",
        )
    )


async def test_kubectl_shows_a_remote_apiservice_with_its_service(tmp_path: Path) -> None:
    async with aggregated() as bed:
        await register(bed)
        config = bed.front.write_kubeconfig(tmp_path / "admin")
        table = await kubectl(config, "get", "apiservice", "v1.samples.example.io")
        row = table.splitlines()[1].split()
        assert row[:3] == ["v1.samples.example.io", "samples/sample-apiserver", "True"]
