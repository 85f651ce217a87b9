"""The karmada profile with a webhook configured as karmada-webhook's is (url naming the
Service, v1beta1 reviews, 3 s timeout): PropagationPolicies, ResourceBindings and Works get their
permanent-id labels when created, as on a real control plane."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from agent.karmada.names import (
    BINDING_PERMANENT_ID_LABEL,
    PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    WORK_PERMANENT_ID_LABEL,
)
from emulator.emulator import Emulator, run_emulator
from emulator.pki import CertificateAuthority
from emulator.works import control_plane_work

from .helpers import Hooks, rule, webhook
from .server import WebhookServer, json_patch

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]
SERVICE = "karmada-webhook.karmada-system.svc"
LABELS = {
    "propagationpolicies": PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    "resourcebindings": BINDING_PERMANENT_ID_LABEL,
    "works": WORK_PERMANENT_ID_LABEL,
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emu() -> AsyncIterator[Emulator]:
    async with run_emulator("karmada", all_crds=True) as emulator:
        yield emulator


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(emu: Emulator) -> AsyncIterator[WebhookServer]:
    hooks = WebhookServer(CertificateAuthority.generate("karmada-webhook-ca"), dns_names=(SERVICE,))
    await hooks.start()
    emu.api.services["karmada-system/karmada-webhook"] = f"127.0.0.1:{hooks.port}"
    yield hooks
    await hooks.stop()


def permanent_id(request: dict[str, object]) -> dict[str, object]:
    """What karmada-webhook's mutating handlers do: a permanent id unless there is one."""
    obj = request["object"]
    assert isinstance(obj, dict)
    resource = request["resource"]
    assert isinstance(resource, dict)
    label = LABELS[str(resource["resource"])]
    labels = obj["metadata"].get("labels")
    if labels and label in labels:
        return {"allowed": True}
    value = str(uuid.uuid4())
    if not labels:
        ops = [{"op": "add", "path": "/metadata/labels", "value": {label: value}}]
    else:
        ops = [
            {"op": "add", "path": "/metadata/labels/" + label.replace("/", "~1"), "value": value}
        ]
    patch = json_patch(ops)
    del patch["patchType"]  # v1beta1 answers carry none
    return patch


async def test_karmada_objects_get_permanent_ids_from_the_webhook(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    server.answer("mutate", permanent_id)
    url = {"url": f"https://{SERVICE}:443/mutate", "caBundle": server.ca_bundle}
    await hooks.mutating(
        "mutating-config",
        *(
            webhook(f"{resource}.karmada.io", url,
                    [rule([resource], group=group, version="*", scope="Namespaced")],
                    admissionReviewVersions=["v1beta1"], timeoutSeconds=3)
            for resource, group in (("propagationpolicies", "policy.karmada.io"),
                                    ("resourcebindings", "work.karmada.io"),
                                    ("works", "work.karmada.io"))
        ),
    )  # fmt: skip
    policy = {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "nginx", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "nginx"}]},
    }  # fmt: skip
    resp = await api.post(
        "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies", json=policy
    )
    assert resp.status_code == 201, resp.text
    assert uuid.UUID(resp.json()["metadata"]["labels"][PROPAGATION_POLICY_PERMANENT_ID_LABEL])

    binding = {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "nginx-deployment", "namespace": "default",
                     "labels": {"propagationpolicy.karmada.io/name": "nginx"}},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx",
                              "namespace": "default"}},
    }  # fmt: skip
    resp = await api.post(
        "/apis/work.karmada.io/v1alpha2/namespaces/default/resourcebindings", json=binding
    )
    assert resp.status_code == 201, resp.text
    labels = resp.json()["metadata"]["labels"]
    assert labels["propagationpolicy.karmada.io/name"] == "nginx"
    assert uuid.UUID(labels[BINDING_PERMANENT_ID_LABEL])

    ns = "karmada-es-member1"
    await api.post("/api/v1/namespaces", json={"metadata": {"name": ns}})
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"},
    }
    work = control_plane_work("member1", "c-configmap", [cm])
    del work["metadata"]["labels"][WORK_PERMANENT_ID_LABEL]
    works = f"/apis/work.karmada.io/v1alpha1/namespaces/{ns}/works"
    resp = await api.post(works, json=work)
    assert resp.status_code == 201, resp.text
    work = resp.json()
    work_id = work["metadata"]["labels"][WORK_PERMANENT_ID_LABEL]
    assert uuid.UUID(work_id)
    assert len(server.calls("mutate")) == 3
    assert server.versions("mutate") == ["admission.k8s.io/v1beta1"] * 3

    # The agent's status reports go to works/status, which the rules leave out.
    work["status"] = {"conditions": [{"type": "Applied", "status": "True", "reason": "AppliedSuccessful",
                                      "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}  # fmt: skip
    resp = await api.put(f"{works}/c-configmap/status", json=work)
    assert resp.status_code == 200, resp.text
    assert len(server.calls("mutate")) == 3
    # An update of the Work itself is reviewed, and keeps its id.
    work = resp.json()
    work["metadata"]["annotations"]["touched"] = "yes"
    resp = await api.put(f"{works}/c-configmap", json=work)
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["labels"][WORK_PERMANENT_ID_LABEL] == work_id
    assert server.calls("mutate")[-1]["operation"] == "UPDATE"
