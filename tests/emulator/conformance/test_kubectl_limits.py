"""kube-apiserver's size limits and validation rules, as kubectl reports them from the emulator:
the 3 MiB request body limit, ConfigMap and Secret data limits (1 MiB), etcd's request limit
(1.5 MiB), Service port ranges, a Deployment selector that must match its template, and unknown
fields (a warning, or an error with strict field validation)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from .kubectl import Kubectl, version_params
from .test_kubectl import deployment, new_ns

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
versions = pytest.mark.parametrize("version", version_params())

MIB = 1024 * 1024


def configmap(ns: str, name: str, size: int) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns},
            "data": {"blob": "x" * size},
        }
    )


@versions
async def test_request_and_object_size_limits(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    body = await k("create", "-f", "-", stdin=configmap(ns, "huge", 3 * MIB + 1))
    assert body.rc == 1
    assert "Request entity too large: limit is 3145728" in body.err

    data = await k("create", "-f", "-", stdin=configmap(ns, "big", MIB + 1))
    assert data.rc == 1
    assert 'The ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes' in (
        data.err
    )
    assert (await k("create", "-f", "-", stdin=configmap(ns, "fits", MIB - 100))).rc == 0

    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "big", "namespace": ns},
        "data": {"blob": base64.b64encode(b"x" * (MIB + 1)).decode()},
    }
    too_big_secret = await k("create", "-f", "-", stdin=json.dumps(secret))
    assert too_big_secret.rc == 1
    assert 'The Secret "big" is invalid: data: Too long: may not be more than 1048576 bytes' in (
        too_big_secret.err
    )

    # No data limit for a Deployment, but etcd takes at most 1.5 MiB per write.
    heavy = json.loads(json.dumps(_deployment_dict(ns, "heavy")))
    heavy["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "BLOB", "value": "x" * (MIB + MIB // 2)}
    ]
    etcd = await k("create", "-f", "-", stdin=json.dumps(heavy))
    assert etcd.rc == 1
    assert "etcdserver: request is too large" in etcd.err
    assert (await k("get", "deployments", "-n", ns, "-o", "name")).out.strip() == ""


@versions
async def test_service_port_range(version: str, admin_kubeconfig: Path, ns: str) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 70000, "targetPort": 0}]},
    }
    bad = await k("create", "-f", "-", stdin=json.dumps(service))
    assert bad.rc == 1
    assert 'The Service "web" is invalid: ' in bad.err
    assert "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive" in (
        bad.err
    )
    assert "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive" in (
        bad.err
    )
    service["spec"]["ports"] = [{"port": 80, "targetPort": 8080}]
    assert (await k("create", "-f", "-", stdin=json.dumps(service))).rc == 0


@versions
async def test_deployment_selector_must_match_template(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    mismatched = _deployment_dict(ns, "web")
    mismatched["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    bad = await k("create", "-f", "-", stdin=json.dumps(mismatched))
    assert bad.rc == 1
    assert (
        'The Deployment "web" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"other"}: `selector` does not match template `labels`'
    ) in bad.err
    assert (await k("create", "-f", "-", stdin=deployment(ns, name="web"))).rc == 0


@versions
async def test_unknown_fields_warn_or_fail_strictly(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    obj = _deployment_dict(ns, "extra")
    obj["spec"]["bogus"] = 1
    strict = await k("create", "-f", "-", "--validate=strict", stdin=json.dumps(obj))
    assert strict.rc == 1
    assert 'strict decoding error: unknown field "spec.bogus"' in strict.err
    warned = await k("create", "-f", "-", "--validate=warn", stdin=json.dumps(obj))
    assert warned.rc == 0
    assert 'Warning: unknown field "spec.bogus"' in warned.err


def _deployment_dict(ns: str, name: str) -> dict[str, object]:
    import yaml

    loaded: dict[str, object] = yaml.safe_load(deployment(ns, name=name))
    return loaded
