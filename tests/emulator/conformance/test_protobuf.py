"""Protobuf request bodies: hand-made vectors from the generated.proto field numbers, and the
real bodies kubectl 1.33's typed clients send, checked against kubectl's own JSON."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from emulator.emulator import Emulator
from emulator.errors import ApiError
from emulator.pki import CertificateAuthority, build_csr
from emulator.protobuf import decode_object
from emulator.requestinfo import RequestAttributes
from emulator.wire import ApiRequest
from tests.polling import eventually

from .kubectl import Kubectl, needs_kubectl
from .pbencode import envelope, ld, vi
from .samples import sample

module_loop = pytest.mark.asyncio(loop_scope="module")


def test_self_subject_access_review_vector() -> None:
    # authorization/v1: SSAR{metadata=1, spec=2{resourceAttributes=1{namespace=1, verb=2,
    # group=3, resource=5}}, status=3{allowed=1}}; ObjectMeta{creationTimestamp=8}.
    attrs = ld(1, "dev") + ld(2, "list") + ld(3, "apps") + ld(5, "deployments")
    raw = ld(1, ld(8, b"")) + ld(2, ld(1, attrs)) + ld(3, vi(1, 0))
    obj = decode_object(envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", raw))
    assert obj == {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {
            "resourceAttributes": {
                "namespace": "dev", "verb": "list", "group": "apps", "resource": "deployments",
            }
        },
        "status": {"allowed": False},
    }  # fmt: skip


def test_deployment_vector_with_negative_and_int_or_string() -> None:
    # apps/v1 DeploymentSpec{replicas=1 (int32, here -1 as a 10-byte varint),
    # strategy=4{rollingUpdate=2{maxSurge=2 IntOrString{type=1, strVal=3}}}}.
    surge = vi(1, 1) + ld(3, "30%")
    spec = vi(1, -1) + ld(4, ld(1, "RollingUpdate") + ld(2, ld(2, surge)))
    labels = ld(11, ld(1, "app") + ld(2, "x"))
    raw = ld(1, ld(1, "d") + labels) + ld(2, spec)
    obj = decode_object(envelope("apps/v1", "Deployment", raw))
    assert obj["spec"]["replicas"] == -1
    assert obj["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "30%"},
    }
    assert obj["metadata"] == {"name": "d", "creationTimestamp": None, "labels": {"app": "x"}}
    # Value structs absent from the wire are still written, as Go's encoding/json does.
    assert obj["status"] == {}


def test_secret_bytes_are_base64_and_time_is_rfc3339() -> None:
    stamp = ld(9, vi(1, 1_700_000_000))  # ObjectMeta.deletionTimestamp{seconds=1}
    raw = ld(1, ld(1, "s") + stamp) + ld(2, ld(1, "k") + ld(2, b"\x00\xff")) + ld(3, "Opaque")
    obj = decode_object(envelope("v1", "Secret", raw))
    assert obj["data"] == {"k": "AP8="}
    assert obj["type"] == "Opaque"
    assert obj["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:20Z"


def test_ingress_rule_value_is_inlined_and_value_structs_are_kept() -> None:
    # networking/v1 IngressRule{host=1, ingressRuleValue=2 (embedded in Go, so inline in
    # JSON){http=1{paths=1{path=1, pathType=3, backend=2{service=4{name=1,
    # port=2{number=2}}}}}}}; IngressSpec{rules=3}.
    backend = ld(4, ld(1, "web") + ld(2, vi(2, 8080)))
    path = ld(1, "/a") + ld(3, "Prefix") + ld(2, backend)
    rule = ld(1, "x.example.com") + ld(2, ld(1, ld(1, path)))
    bare_rule = ld(1, "y.example.com")  # no ingressRuleValue on the wire at all
    obj = decode_object(envelope("networking.k8s.io/v1", "Ingress", ld(2, ld(3, rule) +
                                 ld(3, bare_rule))))  # fmt: skip
    assert obj["spec"] == {"rules": [
        {"host": "x.example.com", "http": {"paths": [
            {"path": "/a", "pathType": "Prefix",
             "backend": {"service": {"name": "web", "port": {"number": 8080}}}},
        ]}},
        {"host": "y.example.com"},
    ]}  # fmt: skip
    assert obj["status"] == {"loadBalancer": {}}


def test_service_port_keeps_zero_port_and_target_port() -> None:
    # core/v1 ServiceSpec{ports=1{name=1}}: ServicePort.port and the IntOrString targetPort
    # have no omitempty effect in encoding/json, so their zero values are written.
    obj = decode_object(envelope("v1", "Service", ld(2, ld(1, ld(1, "p")))))
    assert obj["spec"] == {"ports": [{"name": "p", "port": 0, "targetPort": 0}]}


def test_unknown_kind_is_415_unknown_field_is_skipped_and_garbage_is_400() -> None:
    with pytest.raises(ApiError) as exc:
        decode_object(envelope("storage.k8s.io/v1", "StorageClass", b""))
    assert (exc.value.code, exc.value.reason) == (415, "UnsupportedMediaType")
    assert "no protobuf table for storage.k8s.io/v1, Kind=StorageClass" in exc.value.message
    # A field number the type does not have (a newer client's) is skipped, as the generated
    # Unmarshal does; a known field with the wrong wire type is malformed.
    body = (
        ld(99, "x")
        + vi(98, 7)
        + ld(1, ld(1, "c") + ld(97, ld(1, "y")))
        + ld(2, ld(1, "k") + ld(2, "v"))
    )
    assert decode_object(envelope("v1", "ConfigMap", body)) == {
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "c", "creationTimestamp": None}, "data": {"k": "v"},
    }  # fmt: skip
    with pytest.raises(ApiError) as exc:
        decode_object(envelope("v1", "ConfigMap", vi(2, 1)), "ConfigMap")
    assert (exc.value.code, exc.value.reason) == (400, "BadRequest")
    assert exc.value.message == (
        "the object provided is unrecognized (must be of type ConfigMap): "
        "ConfigMap.data: wire type 0, expected 2"
    )
    with pytest.raises(ApiError) as exc:
        decode_object(b'{"kind":"ConfigMap"}', "ConfigMap")
    assert (exc.value.code, exc.value.reason) == (400, "BadRequest")
    assert exc.value.message.startswith(
        "the object provided is unrecognized (must be of type ConfigMap): provided data does "
        "not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )


@module_loop
async def test_protobuf_to_custom_resource_is_415(emu: Emulator) -> None:
    async with emu.client() as client:
        crd = sample("apiextensions.k8s.io/v1", "CustomResourceDefinition", "pbcr", "")
        created = await client.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd
        )
        assert created.status_code == 201, created.text
        url = "/apis/pbcr.example.com/v1/namespaces/default/widgets"

        async def served() -> bool:
            return (await client.get(url)).status_code == 200

        await eventually(served, what="the Widget CRD served")
        resp = await client.post(
            url,
            content=envelope("pbcr.example.com/v1", "Widget", ld(1, ld(1, "w"))),
            headers={"content-type": "application/vnd.kubernetes.protobuf"},
        )
        assert resp.status_code == 415
        assert resp.json()["reason"] == "UnsupportedMediaType"
        assert resp.json()["message"] == (
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json, application/yaml"
        )
        resp = await client.post(
            "/api/v1/namespaces", content=b"x", headers={"content-type": "text/plain"}
        )
        assert resp.status_code == 415
        assert resp.json()["message"] == (
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json, application/yaml, application/vnd.kubernetes.protobuf"
        )


@module_loop
@needs_kubectl("1.33")
async def test_real_kubectl_bodies_decode_to_kubectl_json(
    emu: Emulator, admin_kubeconfig: Path
) -> None:
    bodies: dict[str, bytes] = {}

    async def capture(req: ApiRequest, attrs: RequestAttributes) -> None:
        if req.content_type == "application/vnd.kubernetes.protobuf":
            bodies[attrs.resource] = req.body

    emu.api.hooks.append(capture)
    try:
        k = Kubectl("1.33", admin_kubeconfig)
        await k.ok("create", "namespace", "pbns")
        for resource, args in (
            ("deployments", ("deployment", "pbd", "--image=nginx:1.25", "--replicas=2",
                             "--port=80")),
            ("configmaps", ("configmap", "pbc", "--from-literal=a=b")),
            ("secrets", ("secret", "generic", "pbs", "--from-literal=a=b")),
            ("serviceaccounts", ("serviceaccount", "pbsa")),
            ("roles", ("role", "pbr", "--verb=get", "--resource=pods")),
            ("rolebindings", ("rolebinding", "pbrb", "--role=pbr", "--user=u")),
            ("services", ("service", "clusterip", "pbsvc", "--tcp=80:8080", "--tcp=443")),
            ("services", ("service", "nodeport", "pbnp", "--tcp=80:8080", "--node-port=30080")),
            ("services", ("service", "loadbalancer", "pblb", "--tcp=5678:8080")),
            ("services", ("service", "externalname", "pben", "--external-name=x.example.com")),
            ("jobs", ("job", "pbj", "--image=busybox", "--", "echo", "hi")),
            ("cronjobs", ("cronjob", "pbcj", "--image=busybox", "--schedule=*/5 * * * *",
                          "--restart=OnFailure", "--", "date")),
            ("jobs", ("job", "pbj2", "--from=cronjob/pbcj")),
            ("poddisruptionbudgets", ("pdb", "pbpdb", "--selector=app=x", "--min-available=1")),
            ("poddisruptionbudgets", ("pdb", "pbpdb2", "--selector=app=y",
                                      "--max-unavailable=50%")),
            ("ingresses", ("ingress", "pbing", "--class=nginx", "--annotation=a=b",
                           "--rule=foo.com/bar=svc1:8080,tls=my-cert", "--rule=/path*=svc2:http",
                           "--default-backend=def:http")),
        ):  # fmt: skip
            cut = args.index("--") if "--" in args else len(args)
            flags, command = (*args[:cut], "-n", "pbns"), args[cut:]
            await k.ok("create", *flags, *command)
            dry_run = await k.ok("create", *flags, "--dry-run=client", "-o", "json", *command)
            assert decode_object(bodies[resource]) == json.loads(dry_run), args
        # Kinds the emulator does not serve are unknown resources (404), never a 415.
        for args in (("priorityclass", "pbpc", "--value=10"), ("quota", "pbq", "--hard=pods=2")):
            missing = await k("create", *args, "-n", "pbns")
            assert (missing.rc, missing.err.strip()) == (
                1,
                f"error: failed to create {args[0]}: the server could not find the requested "
                "resource",
            )
        assert (await k.ok("auth", "can-i", "get", "pods")).strip() == "yes"
        assert decode_object(bodies["selfsubjectaccessreviews"])["spec"] == {
            "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}
        }
    finally:
        emu.api.hooks.remove(capture)


@module_loop
@needs_kubectl("1.33")
async def test_kubectl_typed_bodies_for_cluster_kinds_hpa_and_csr_approval(
    emu: Emulator, admin_kubeconfig: Path, tmp_path: Path
) -> None:
    bodies: dict[tuple[str, str], bytes] = {}

    async def capture(req: ApiRequest, attrs: RequestAttributes) -> None:
        if req.content_type == "application/vnd.kubernetes.protobuf":
            bodies[(attrs.resource, attrs.subresource)] = req.body

    ca = CertificateAuthority.generate("pb.example.com")
    (tmp_path / "tls.crt").write_bytes(ca.cert_pem)
    (tmp_path / "tls.key").write_bytes(ca.key_pem)
    emu.api.hooks.append(capture)
    try:
        k = Kubectl("1.33", admin_kubeconfig)
        await k.ok("create", "namespace", "pbns2")
        await k.ok("create", "deployment", "pbd", "--image=nginx:1.25", "-n", "pbns2")
        for resource, args in (
            ("clusterroles", ("create", "clusterrole", "pbcr", "--verb=get,list",
                              "--resource=pods,deployments.apps", "--resource-name=x")),
            ("clusterroles", ("create", "clusterrole", "pbagg",
                              "--aggregation-rule=example.com/aggregate=true")),
            ("clusterrolebindings", ("create", "clusterrolebinding", "pbcrb",
                                     "--clusterrole=pbcr", "--user=u", "--group=g",
                                     "--serviceaccount=pbns2:default")),
            ("secrets", ("create", "secret", "docker-registry", "pbdr", "-n", "pbns2",
                         "--docker-server=r.example.com", "--docker-username=u",
                         "--docker-password=p", "--docker-email=u@example.com")),
            ("secrets", ("create", "secret", "tls", "pbtls", "-n", "pbns2",
                         f"--cert={tmp_path / 'tls.crt'}", f"--key={tmp_path / 'tls.key'}")),
            ("horizontalpodautoscalers", ("autoscale", "deployment/pbd", "-n", "pbns2",
                                          "--min=2", "--max=5", "--cpu-percent=70")),
        ):  # fmt: skip
            await k.ok(*args)
            dry_run = await k.ok(*args, "--dry-run=client", "-o", "json")
            assert decode_object(bodies[(resource, "")]) == json.loads(dry_run), args

        # `certificate approve` sends the CSR it read back, with an Approved condition.
        csr_pem, _ = build_csr("pb-user", ["pb-group"])
        csr = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
               "metadata": {"name": "pbcsr"},
               "spec": {"request": base64.b64encode(csr_pem).decode(),
                        "signerName": "example.com/pb", "usages": ["client auth"]}}  # fmt: skip
        await k.ok("create", "-f", "-", stdin=json.dumps(csr))
        before = json.loads(
            await k.ok("get", "csr", "pbcsr", "-o", "json", "--show-managed-fields")
        )
        await k.ok("certificate", "approve", "pbcsr")
        sent = decode_object(bodies[("certificatesigningrequests", "approval")])
        (condition,) = sent["status"].pop("conditions")
        assert condition["type"] == "Approved"
        assert condition["reason"] == "KubectlApprove"
        # The rest is the object kubectl read, re-encoded from its Go struct (whose value
        # `status` is always written).
        assert sent == {**before, "status": {}}
    finally:
        emu.api.hooks.remove(capture)
