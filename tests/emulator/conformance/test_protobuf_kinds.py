"""Protobuf bodies for every built-in kind the emulator serves: a client that encodes them from
the generated.proto field numbers, as client-go does, and the emulator storing what the same
object as a JSON body gives."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from emulator.builtin import builtin_types
from emulator.emulator import Emulator
from emulator.errors import ApiError
from emulator.pbschema import KINDS, MESSAGES
from emulator.profiles import karmada_profile, member_profile
from emulator.protobuf import NOT_PROTOBUF, PROTOBUF, decode_object, message_kind
from emulator.registry import ResourceType

from .pbencode import encode_message, encode_object, envelope, ld
from .samples import SAMPLES, sample

module_loop = pytest.mark.asyncio(loop_scope="module")
JSON = dict[str, Any]
PB = {"content-type": PROTOBUF}
NS = "default"


def _served_builtins() -> dict[tuple[str, str], ResourceType]:
    """Every built-in (not custom) kind the member and karmada profiles serve."""
    served: dict[tuple[str, str], ResourceType] = {}
    for profile in (member_profile(), karmada_profile()):
        for rt in [*builtin_types(), *profile.types]:
            if not rt.crd_name:
                served[(rt.api_version, rt.kind)] = rt
    return served


SERVED = _served_builtins()
STORED = sorted(k for k, rt in SERVED.items() if rt.verbs != ("create",) and k in SAMPLES)


def test_no_served_builtin_kind_answers_415() -> None:
    refused: dict[str, int] = {}
    for (api_version, kind), rt in sorted(SERVED.items()):
        try:
            decode_object(envelope(api_version, kind, ld(1, ld(1, "x"))), rt.kind)
        except ApiError as exc:
            refused[f"{api_version}/{kind}"] = exc.code
    # Only Karmada's aggregated Cluster, which has no protobuf form, refuses (with a 400).
    assert refused == {f"{v}/{k}": 400 for v, k in NOT_PROTOBUF}


def test_aggregated_cluster_has_no_protobuf_form() -> None:
    with pytest.raises(ApiError) as exc:
        decode_object(envelope("cluster.karmada.io/v1alpha1", "Cluster", b""), "Cluster")
    assert (exc.value.code, exc.value.message) == (
        400,
        'Cluster in version "v1alpha1" cannot be handled as a Cluster: object *v1alpha1.Cluster '
        "does not implement the protobuf marshalling interface and cannot be encoded to a "
        "protobuf message",
    )


def test_schema_table_is_closed() -> None:
    """Every message a field names is defined, and every kind's message exists."""
    named = {
        f.type.removeprefix("map:").removeprefix("msg:")
        for fields in MESSAGES.values()
        for f in fields
        if "msg:" in f.type
    }
    assert sorted(named - set(MESSAGES)) == []
    assert sorted(m for m in KINDS.values() if m not in MESSAGES) == []
    for name, fields in MESSAGES.items():
        numbers = [f.number for f in fields]
        assert len(numbers) == len(set(numbers)), name


def test_every_stored_builtin_kind_has_a_sample() -> None:
    stored = {k for k, rt in SERVED.items() if rt.verbs != ("create",)}
    assert sorted(stored - set(SAMPLES) - set(NOT_PROTOBUF)) == []


@pytest.mark.parametrize(("api_version", "kind"), sorted(SAMPLES))
def test_encoded_sample_decodes_to_its_json(api_version: str, kind: str) -> None:
    obj = sample(api_version, kind, "pb", NS)
    message = message_kind(api_version, kind)
    assert message is not None
    assert decode_object(encode_object(obj, message), kind) == obj


def test_object_meta_round_trips() -> None:
    meta = {
        "name": "web-7d4b9", "generateName": "web-", "namespace": NS, "uid": "u-1",
        "resourceVersion": "42", "generation": 3,
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "deletionTimestamp": "2024-05-01T11:00:00Z", "deletionGracePeriodSeconds": 0,
        "labels": {"app": "web"}, "annotations": {"example.com/note": ""},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                             "uid": "u-0", "controller": True, "blockOwnerDeletion": False}],
        "finalizers": ["example.com/keep"],
        "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                           "apiVersion": "v1", "time": "2024-05-01T10:00:00Z",
                           "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}},
                          {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                           "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}},
                           "subresource": "status"}],
    }  # fmt: skip
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    assert decode_object(encode_object(obj, "ConfigMap")) == obj


def _normalized(obj: JSON) -> JSON:
    out = copy.deepcopy(obj)
    for key in ("uid", "creationTimestamp", "resourceVersion", "managedFields"):
        out["metadata"].pop(key, None)
    return out


async def _create(client: httpx.AsyncClient, rt: ResourceType, obj: JSON, pb: bool) -> JSON:
    prefix = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    url = f"{prefix}/namespaces/{NS}/{rt.resource}" if rt.namespaced else f"{prefix}/{rt.resource}"
    if pb:
        message = message_kind(rt.api_version, rt.kind)
        assert message is not None
        resp = await client.post(
            url, params={"dryRun": "All"}, content=encode_object(obj, message), headers=PB
        )
    else:
        resp = await client.post(url, params={"dryRun": "All"}, json=obj)
    assert resp.status_code == 201, resp.text
    result: JSON = resp.json()
    return result


@module_loop
@pytest.mark.parametrize(("api_version", "kind"), STORED)
async def test_protobuf_body_is_stored_as_its_json_body(
    emu: Emulator, api_version: str, kind: str
) -> None:
    rt = SERVED[(api_version, kind)]
    async with emu.client() as client:
        from_json = await _create(client, rt, sample(api_version, kind, "pb", NS), pb=False)
        from_pb = await _create(client, rt, sample(api_version, kind, "pb", NS), pb=True)
    assert _normalized(from_pb) == _normalized(from_json)


REVIEWS: list[tuple[str, JSON]] = [
    ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "metadata": {"creationTimestamp": None},
        "spec": {"resourceAttributes": {"namespace": NS, "verb": "list", "group": "apps",
                                        "resource": "deployments",
                                        "labelSelector": {"rawSelector": "app=web"}}},
        "status": {"allowed": False}}),
    ("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
        "metadata": {"creationTimestamp": None}, "spec": {"namespace": NS},
        "status": {"resourceRules": None, "nonResourceRules": None, "incomplete": False}}),
    ("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "metadata": {"creationTimestamp": None},
        "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"},
                 "user": "jane", "groups": ["system:authenticated"],
                 "extra": {"scopes": ["a", "b"]}},
        "status": {"allowed": False}}),
    (f"/apis/authorization.k8s.io/v1/namespaces/{NS}/localsubjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
        "metadata": {"namespace": NS, "creationTimestamp": None},
        "spec": {"resourceAttributes": {"namespace": NS, "verb": "get", "resource": "pods"},
                 "user": "system:serviceaccount:default:app"},
        "status": {"allowed": False}}),
    ("/apis/authentication.k8s.io/v1/selfsubjectreviews", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
        "metadata": {"creationTimestamp": None}, "status": {"userInfo": {}}}),
    ("/apis/authentication.k8s.io/v1/tokenreviews", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "metadata": {"creationTimestamp": None},
        "spec": {"token": "not-a-token", "audiences": ["api"]},
        "status": {"user": {}}}),
]  # fmt: skip


@module_loop
@pytest.mark.parametrize(
    ("url", "review"), REVIEWS, ids=lambda v: v.get("kind", "") if isinstance(v, dict) else ""
)
async def test_protobuf_review_is_answered_as_its_json(
    emu: Emulator, url: str, review: JSON
) -> None:
    message = message_kind(review["apiVersion"], review["kind"])
    assert message is not None
    assert decode_object(encode_object(review, message)) == review
    async with emu.client() as client:
        from_json = await client.post(url, json=review)
        from_pb = await client.post(url, content=encode_object(review, message), headers=PB)
    assert from_json.status_code == from_pb.status_code == 201, from_pb.text
    assert from_pb.json() == from_json.json()


@module_loop
async def test_scale_and_delete_options_in_protobuf(emu: Emulator) -> None:
    deployment = sample("apps/v1", "Deployment", "pbscale", NS)
    base = f"/apis/apps/v1/namespaces/{NS}/deployments"
    async with emu.client() as client:
        assert (await client.post(base, json=deployment)).status_code == 201
        scale = {"metadata": {"name": "pbscale", "namespace": NS}, "spec": {"replicas": 5}}
        body = envelope("autoscaling/v1", "Scale", encode_message("Scale", scale))
        resp = await client.put(f"{base}/pbscale/scale", content=body, headers=PB)
        assert resp.status_code == 200, resp.text
        assert resp.json()["spec"] == {"replicas": 5}
        got = await client.get(f"{base}/pbscale")
        assert got.json()["spec"]["replicas"] == 5

        def delete_options(opts: JSON) -> bytes:
            return envelope("meta.k8s.io/v1", "DeleteOptions",
                            encode_message("DeleteOptions", opts))  # fmt: skip

        dry = delete_options({"dryRun": ["All"], "propagationPolicy": "Foreground"})
        resp = await client.request("DELETE", f"{base}/pbscale", content=dry, headers=PB)
        assert resp.status_code == 200, resp.text
        assert (await client.get(f"{base}/pbscale")).status_code == 200
        stale = delete_options({"preconditions": {"uid": "not-its-uid"}})
        resp = await client.request("DELETE", f"{base}/pbscale", content=stale, headers=PB)
        assert resp.status_code == 409, resp.text
        assert "Precondition failed: UID in precondition: not-its-uid" in resp.json()["message"]
        gone = delete_options({"gracePeriodSeconds": 0, "propagationPolicy": "Background"})
        resp = await client.request("DELETE", f"{base}/pbscale", content=gone, headers=PB)
        assert resp.status_code == 200, resp.text
        assert (await client.get(f"{base}/pbscale")).status_code == 404
