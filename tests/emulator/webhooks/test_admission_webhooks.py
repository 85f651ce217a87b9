"""The emulator calls admission webhooks as kube-apiserver does: what it sends, what it does
with the answers, which webhooks it calls, and how failures end under each failurePolicy."""

from __future__ import annotations

import asyncio
import base64
import socket
from typing import Any

import httpx
import pytest

from emulator.emulator import Emulator
from emulator.pki import CertificateAuthority
from emulator.webhook_config import GROUP, VALIDATING
from tests import polling

from .helpers import ADMISSION, Hooks, rule, webhook
from .server import WebhookServer, json_patch

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]
JSON = dict[str, Any]
POLICIES = "/apis/policy.example.io/v1alpha1"


def permanent_id(_request: JSON) -> JSON:
    """What karmada-webhook does to a new PropagationPolicy: a permanent-id label, a finalizer."""
    return json_patch(
        [
            {"op": "add", "path": "/metadata/labels", "value": {"example.io/permanent-id": "p-1"}},
            {
                "op": "add",
                "path": "/metadata/finalizers",
                "value": ["example.io/policy-controller"],
            },
        ]
    )


def configmap(ns: str, name: str, labels: dict[str, str] | None = None) -> JSON:
    return {"metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "data": {"a": "1"}}


async def create_cm(api: httpx.AsyncClient, ns: str, name: str, **kw: Any) -> httpx.Response:
    return await api.post(f"/api/v1/namespaces/{ns}/configmaps", json=configmap(ns, name, **kw))


async def policy_crd(api: httpx.AsyncClient) -> str:
    """A PropagationPolicy-like custom resource, served once its CRD is established."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "propagationpolicies.policy.example.io"},
        "spec": {
            "group": "policy.example.io",
            "scope": "Namespaced",
            "names": {"kind": "PropagationPolicy", "plural": "propagationpolicies"},
            "versions": [
                {
                    "name": "v1alpha1", "served": True, "storage": True,
                    "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }  # fmt: skip
    resp = await api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert resp.status_code == 201, resp.text
    await polling.eventually(
        lambda: api.get(f"{POLICIES}/propagationpolicies"),
        until=lambda r: r.status_code == 200,
        what="the PropagationPolicy CRD served",
    )
    return "propagationpolicies"


async def test_mutating_webhook_labels_and_finalizes_custom_and_builtin_objects(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    policies = await policy_crd(api)
    server.answer("permanent-id", permanent_id)
    await hooks.mutating(
        "karmada-like",
        webhook(
            "propagationpolicy.example.io", hooks.url("permanent-id"),
            [rule([policies], ("CREATE",), "policy.example.io", "*"), rule(["configmaps"])],
        ),
    )  # fmt: skip
    ns = await hooks.namespace()
    body = {
        "apiVersion": "policy.example.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "nginx"}, "spec": {"placement": {}},
    }  # fmt: skip
    resp = await api.post(f"{POLICIES}/namespaces/{ns}/{policies}", json=body)
    assert resp.status_code == 201, resp.text
    meta = resp.json()["metadata"]
    assert meta["labels"] == {"example.io/permanent-id": "p-1"}
    assert meta["finalizers"] == ["example.io/policy-controller"]
    stored = (await api.get(f"{POLICIES}/namespaces/{ns}/{policies}/nginx")).json()
    assert stored["metadata"]["finalizers"] == ["example.io/policy-controller"]

    (review,) = server.calls("permanent-id")
    assert review["operation"] == "CREATE"
    assert review["kind"] == {"group": "policy.example.io", "version": "v1alpha1",
                              "kind": "PropagationPolicy"}  # fmt: skip
    assert review["resource"] == {"group": "policy.example.io", "version": "v1alpha1",
                                  "resource": "propagationpolicies"}  # fmt: skip
    assert review["requestKind"] == review["kind"]
    assert review["requestResource"] == review["resource"]
    assert (review["name"], review["namespace"]) == ("nginx", ns)
    assert review["object"]["spec"] == {"placement": {}}
    assert review["oldObject"] is None
    assert review["dryRun"] is False
    assert review["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert review["userInfo"]["username"] == "kubernetes-admin"
    assert "system:masters" in review["userInfo"]["groups"]
    assert len(review["uid"]) == 36

    resp = await create_cm(api, ns, "settings")
    assert resp.status_code == 201, resp.text
    assert resp.json()["metadata"]["labels"] == {"example.io/permanent-id": "p-1"}
    assert resp.json()["metadata"]["finalizers"] == ["example.io/policy-controller"]

    # An UPDATE shows the stored object as oldObject and the options of the write.
    patch = {"data": {"a": "2"}}
    resp = await api.patch(
        f"/api/v1/namespaces/{ns}/configmaps/settings?fieldManager=tester", json=patch,
        headers={"content-type": "application/merge-patch+json"},
    )  # fmt: skip
    assert resp.status_code == 200, resp.text
    update = server.calls("permanent-id")[-1]
    assert update["operation"] == "UPDATE"
    assert update["oldObject"]["data"] == {"a": "1"}
    assert update["object"]["data"] == {"a": "2"}
    assert update["options"] == {
        "kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "tester"
    }  # fmt: skip


async def test_validating_webhook_denies_with_its_status(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    server.answer(
        "deny",
        lambda r: {"allowed": False, "status": {"code": 403, "reason": "Forbidden",
                                                "message": f"{r['name']} is not welcome"}},
    )  # fmt: skip
    await hooks.validating(
        "deny", webhook("deny.example.com", hooks.url("deny"), [rule(["configmaps"])])
    )
    ns = await hooks.namespace()
    resp = await create_cm(api, ns, "intruder")
    assert resp.status_code == 403
    status = resp.json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'admission webhook "deny.example.com" denied the request: intruder is not welcome'
    )
    assert (await api.get(f"/api/v1/namespaces/{ns}/configmaps/intruder")).status_code == 404

    server.answer("deny", lambda r: {"allowed": False, "warnings": ["look closer"] * 2})
    resp = await create_cm(api, ns, "quiet")
    assert resp.status_code == 400
    assert resp.json()["message"] == (
        'admission webhook "deny.example.com" denied the request without explanation'
    )
    assert resp.headers["warning"] == '299 - "look closer"'


async def test_webhooks_whose_rules_do_not_match_are_not_called(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    server.answer("never", lambda r: {"allowed": False})
    server.answer("status", lambda r: {"allowed": True})
    never = hooks.url("never")
    await hooks.validating(
        "unmatched",
        webhook("secrets.example.com", never, [rule(["secrets"])]),
        webhook("updates.example.com", never, [rule(["configmaps"], ("UPDATE",))]),
        webhook("apps.example.com", never, [rule(["configmaps"], group="apps")]),
        webhook("v2.example.com", never, [rule(["configmaps"], version="v2")]),
        webhook("cluster.example.com", never, [rule(["configmaps"], scope="Cluster")]),
        webhook("cmstatus.example.com", never, [rule(["configmaps/status"])]),
        webhook("podstatus.example.com", hooks.url("status"), [rule(["pods/status"])]),
    )
    ns = await hooks.namespace()
    assert (await create_cm(api, ns, "free")).status_code == 201
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    resp = await api.post(f"/api/v1/namespaces/{ns}/pods", json=pod)
    assert resp.status_code == 201, resp.text
    assert server.calls("never") == []
    assert server.calls("status") == []

    live = resp.json()
    live["status"] = {"phase": "Running"}
    resp = await api.put(f"/api/v1/namespaces/{ns}/pods/p/status", json=live)
    assert resp.status_code == 200, resp.text
    (review,) = server.calls("status")
    assert (review["subResource"], review["requestSubResource"]) == ("status", "status")
    assert review["kind"]["kind"] == "Pod"
    assert server.calls("never") == []


async def test_object_and_namespace_selectors(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    server.answer("selected", lambda r: {"allowed": False, "status": {"message": "selected"}})
    await hooks.validating(
        "selectors",
        webhook(
            "objects.example.com", hooks.url("selected"), [rule(["configmaps"])],
            objectSelector={"matchLabels": {"guarded": "yes"}},
        ),
        webhook(
            "namespaces.example.com", hooks.url("selected"), [rule(["configmaps"])],
            namespaceSelector={"matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod"]}]},
        ),
    )  # fmt: skip
    dev = await hooks.namespace({"env": "dev"})
    prod = await hooks.namespace({"env": "prod"})
    assert (await create_cm(api, dev, "plain")).status_code == 201
    resp = await create_cm(api, dev, "guarded", labels={"guarded": "yes"})
    assert resp.status_code == 400
    assert resp.json()["message"] == (
        'admission webhook "objects.example.com" denied the request: selected'
    )
    resp = await create_cm(api, prod, "plain")
    assert resp.status_code == 400
    assert '"namespaces.example.com" denied' in resp.json()["message"]
    # An update that removes the label is still seen: the old object matches.
    await hooks.cleanup()
    hooks.created.clear()
    assert (await create_cm(api, dev, "was-guarded", labels={"guarded": "yes"})).status_code == 201
    await hooks.validating(
        "selectors",
        webhook("objects.example.com", hooks.url("selected"), [rule(["configmaps"])],
                objectSelector={"matchLabels": {"guarded": "yes"}}),
    )  # fmt: skip
    resp = await api.patch(
        f"/api/v1/namespaces/{dev}/configmaps/was-guarded",
        json={"metadata": {"labels": {"guarded": None}}},
        headers={"content-type": "application/merge-patch+json"},
    )
    assert resp.status_code == 400, resp.text


def assert_failure_policy(resp: httpx.Response, policy: str, reason: str) -> None:
    """A failed call lets the write through under Ignore and fails it with a 500 under Fail."""
    if policy == "Ignore":
        assert resp.status_code == 201, resp.text
        return
    assert resp.status_code == 500
    assert resp.json()["reason"] == "InternalError"
    assert resp.json()["message"] == f"Internal error occurred: {reason}"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_unreachable_webhook_follows_failure_policy(
    policy: str, hooks: Hooks, api: httpx.AsyncClient
) -> None:
    port = _closed_port()
    config = {"url": f"https://127.0.0.1:{port}/mutate", "caBundle": hooks.server.ca_bundle}
    await hooks.mutating(
        "unreachable",
        webhook("down.example.com", config, [rule(["configmaps"])], failurePolicy=policy),
    )
    ns = await hooks.namespace()
    assert_failure_policy(
        await create_cm(api, ns, "cm"), policy,
        'failed calling webhook "down.example.com": failed to call webhook: Post '
        f'"https://127.0.0.1:{port}/mutate?timeout=10s": dial tcp 127.0.0.1:{port}: connect: '
        "connection refused",
    )  # fmt: skip


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_slow_webhook_times_out_per_failure_policy(
    policy: str, hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    release = asyncio.Event()

    async def stall(_request: JSON) -> JSON:
        await release.wait()
        return {"allowed": True}

    server.answer("stall", stall)
    await hooks.validating(
        "slow",
        webhook("slow.example.com", hooks.url("stall"), [rule(["configmaps"])],
                failurePolicy=policy, timeoutSeconds=1),
    )  # fmt: skip
    ns = await hooks.namespace()
    try:
        resp = await create_cm(api, ns, "cm")
    finally:
        release.set()
    assert len(server.calls("stall")) == 1
    assert_failure_policy(
        resp, policy,
        'failed calling webhook "slow.example.com": failed to call webhook: Post '
        f'"{server.url("stall")}?timeout=1s": context deadline exceeded',
    )  # fmt: skip


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_untrusted_certificate_follows_failure_policy(
    policy: str, hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    other = CertificateAuthority.generate("someone-else")
    config = {"url": server.url("tls"), "caBundle": base64.b64encode(other.cert_pem).decode()}
    await hooks.validating(
        "tls", webhook("tls.example.com", config, [rule(["configmaps"])], failurePolicy=policy)
    )
    ns = await hooks.namespace()
    resp = await create_cm(api, ns, "cm")
    assert server.calls("tls") == []
    assert_failure_policy(
        resp, policy,
        'failed calling webhook "tls.example.com": failed to call webhook: Post '
        f'"{server.url("tls")}?timeout=10s": tls: failed to verify certificate: x509: '
        "certificate signed by unknown authority",
    )  # fmt: skip


async def test_dry_run_reaches_only_webhooks_without_side_effects(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient, emu: Emulator
) -> None:
    server.answer("dry", lambda r: {"allowed": True})
    await hooks.validating(
        "dry",
        webhook("dry.example.com", hooks.url("dry"), [rule(["configmaps"])],
                sideEffects="NoneOnDryRun"),
    )  # fmt: skip
    ns = await hooks.namespace()
    url = f"/api/v1/namespaces/{ns}/configmaps?dryRun=All"
    resp = await api.post(url, json=configmap(ns, "cm"))
    assert resp.status_code == 201, resp.text
    (review,) = server.calls("dry")
    assert review["dryRun"] is True
    assert review["options"]["dryRun"] == ["All"]
    assert (await api.get(f"/api/v1/namespaces/{ns}/configmaps/cm")).status_code == 404

    # v1 refuses to store a webhook with side effects; one kept from v1beta1 days still
    # exists in old clusters, and kube refuses dry runs it would see.
    legacy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "legacy", "uid": "legacy-uid"},
        "webhooks": [webhook("legacy.example.com", hooks.url("dry"), [rule(["configmaps"])],
                             sideEffects="Unknown")],
    }  # fmt: skip
    emu.api.storage.create((GROUP, VALIDATING), legacy)
    hooks.created.append(f"{ADMISSION}/validatingwebhookconfigurations/legacy")
    resp = await api.post(url, json=configmap(ns, "cm"))
    assert resp.status_code == 400
    assert (
        resp.json()["message"] == 'admission webhook "legacy.example.com" does not support dry run'
    )
    resp = await create_cm(api, ns, "real")
    assert resp.status_code == 201, resp.text


async def test_mutating_webhooks_run_in_name_order_and_are_reinvoked_if_needed(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    order: list[str] = []

    def first(request: JSON) -> JSON:
        order.append("first")
        return {"allowed": True}

    def second(request: JSON) -> JSON:
        order.append("second")
        labels = request["object"]["metadata"].get("labels") or {}
        if "second" in labels:
            return {"allowed": True}
        return json_patch([{"op": "add", "path": "/metadata/labels/second", "value": "1"}])

    server.answer("first", first)
    server.answer("second", second)
    # Created in reverse: the configuration names, not creation, give the order.
    await hooks.mutating("b-second", webhook("second.example.com", hooks.url("second"),
                                             [rule(["configmaps"])]))  # fmt: skip
    await hooks.mutating("a-first", webhook("first.example.com", hooks.url("first"),
                                            [rule(["configmaps"])], reinvocationPolicy="IfNeeded"))  # fmt: skip
    ns = await hooks.namespace()
    resp = await create_cm(api, ns, "cm", labels={"x": "y"})
    assert resp.status_code == 201, resp.text
    assert resp.json()["metadata"]["labels"] == {"x": "y", "second": "1"}
    assert order == ["first", "second", "first"]
    assert server.calls("first")[-1]["object"]["metadata"]["labels"]["second"] == "1"


async def test_delete_is_reviewed_with_the_stored_object(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    server.answer("keep", lambda r: {"allowed": False, "status": {"message": "kept"}})
    ns = await hooks.namespace()
    assert (await create_cm(api, ns, "cm")).status_code == 201
    await hooks.validating(
        "keep", webhook("keep.example.com", hooks.url("keep"), [rule(["configmaps"], ("DELETE",))])
    )
    resp = await api.delete(f"/api/v1/namespaces/{ns}/configmaps/cm")
    assert resp.status_code == 400
    (review,) = server.calls("keep")
    assert review["operation"] == "DELETE"
    assert review["object"] is None
    assert review["oldObject"]["metadata"]["name"] == "cm"
    assert review["options"]["kind"] == "DeleteOptions"
    assert (await api.get(f"/api/v1/namespaces/{ns}/configmaps/cm")).status_code == 200


async def test_service_references_resolve_through_the_address_map(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient, emu: Emulator
) -> None:
    server.answer("svc", lambda r: {"allowed": False, "status": {"message": "via service"}})
    emu.api.services["webhooks/hooks"] = f"127.0.0.1:{server.port}"
    service = {"namespace": "webhooks", "name": "hooks", "path": "/svc", "port": 8443}
    config = await hooks.validating(
        "svc",
        webhook("svc.example.com", {"service": service, "caBundle": server.ca_bundle},
                [rule(["configmaps"])]),
    )  # fmt: skip
    assert config["webhooks"][0]["clientConfig"]["service"]["port"] == 8443
    ns = await hooks.namespace()
    resp = await create_cm(api, ns, "cm")
    assert resp.status_code == 400, resp.text
    assert resp.json()["message"].endswith("denied the request: via service")


async def test_configurations_are_defaulted_and_validated(
    hooks: Hooks, api: httpx.AsyncClient
) -> None:
    config = await hooks.mutating(
        "defaults", webhook("defaults.example.com", hooks.url("x"), [rule(["configmaps"])])
    )
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Fail"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["timeoutSeconds"] == 10
    assert hook["reinvocationPolicy"] == "Never"
    assert hook["namespaceSelector"] == {}
    assert hook["objectSelector"] == {}
    assert hook["rules"][0]["scope"] == "*"

    bad = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bad"},
        "webhooks": [
            {"name": "short.io", "clientConfig": {"url": "http://example.com/x"}},
            {"name": "ok.example.com", "clientConfig": {}, "admissionReviewVersions": ["v1"],
             "sideEffects": "Some", "timeoutSeconds": 31},
        ],
    }  # fmt: skip
    resp = await api.post(f"{ADMISSION}/validatingwebhookconfigurations", json=bad)
    assert resp.status_code == 422
    causes = [f"{c['field']}: {c['message']}" for c in resp.json()["details"]["causes"]]
    assert causes == [
        'webhooks[0].name: Invalid value: "short.io": should be a domain with at least three '
        "segments separated by dots",
        "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        "webhooks[0].clientConfig.url: Invalid value: \"http://example.com/x\": 'https' is the "
        "only allowed URL scheme",
        'webhooks[1].sideEffects: Unsupported value: "Some": supported values: "None", '
        '"NoneOnDryRun"',
        "webhooks[1].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 "
        "and 30 seconds",
        "webhooks[1].clientConfig: Required value: exactly one of url or service is required",
    ]


async def test_patch_written_meanwhile_starts_over_on_the_new_object(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    ns = await hooks.namespace()
    assert (await create_cm(api, ns, "cm")).status_code == 201
    merge = {"content-type": "application/merge-patch+json"}
    url = f"/api/v1/namespaces/{ns}/configmaps/cm"
    seen: list[JSON] = []

    async def interfere(request: JSON) -> JSON:
        seen.append(request["object"]["data"])
        if len(seen) == 1:  # another client writes while the first patch is being reviewed
            resp = await api.patch(url, json={"data": {"other": "x"}}, headers=merge)
            assert resp.status_code == 200, resp.text
        return {"allowed": True}

    server.answer("interfere", interfere)
    await hooks.validating(
        "interfere",
        webhook("interfere.example.com", hooks.url("interfere"), [rule(["configmaps"], ("UPDATE",))]),
    )  # fmt: skip
    resp = await api.patch(url, json={"data": {"mine": "y"}}, headers=merge)
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"] == {"a": "1", "mine": "y", "other": "x"}
    assert seen == [
        {"a": "1", "mine": "y"},
        {"a": "1", "other": "x"},
        {"a": "1", "mine": "y", "other": "x"},
    ]


async def test_equivalent_match_policy_sends_the_version_the_rule_names(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    versions = [
        {"name": v, "served": True, "storage": v == "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
        for v in ("v1", "v2")
    ]  # fmt: skip
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.multi.example.io"},
        "spec": {"group": "multi.example.io", "scope": "Namespaced", "versions": versions,
                 "names": {"kind": "Gadget", "plural": "gadgets"}},
    }  # fmt: skip
    resp = await api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert resp.status_code == 201, resp.text
    await polling.eventually(
        lambda: api.get("/apis/multi.example.io/v2/gadgets"),
        until=lambda r: r.status_code == 200,
        what="gadgets served at v2",
    )
    server.answer("equivalent", lambda r: {"allowed": True})
    server.answer("exact", lambda r: {"allowed": True})
    v2_only = [rule(["gadgets"], ("CREATE",), "multi.example.io", "v2")]
    await hooks.validating(
        "versions",
        webhook("equivalent.example.com", hooks.url("equivalent"), v2_only),
        webhook("exact.example.com", hooks.url("exact"), v2_only, matchPolicy="Exact"),
    )
    ns = await hooks.namespace()
    gadget = {"apiVersion": "multi.example.io/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    resp = await api.post(f"/apis/multi.example.io/v1/namespaces/{ns}/gadgets", json=gadget)
    assert resp.status_code == 201, resp.text
    assert server.calls("exact") == []
    (review,) = server.calls("equivalent")
    assert review["kind"] == {"group": "multi.example.io", "version": "v2", "kind": "Gadget"}
    assert review["requestKind"]["version"] == "v1"
    assert review["resource"]["version"] == "v2"
    assert review["requestResource"]["version"] == "v1"
    assert review["object"]["apiVersion"] == "multi.example.io/v2"


async def test_karmada_style_service_url_and_v1beta1_reviews(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient, emu: Emulator
) -> None:
    """karmada-webhook's configuration: a `url` naming the Service's DNS name, v1beta1 reviews,
    whose patches need no patchType."""
    patch = json_patch([{"op": "add", "path": "/metadata/labels", "value": {"id": "w-1"}}])
    del patch["patchType"]
    server.answer("mutate-work", lambda r: patch)
    emu.api.services["webhooks/hooks"] = f"127.0.0.1:{server.port}"
    config = {"url": "https://hooks.webhooks.svc:443/mutate-work", "caBundle": server.ca_bundle}
    await hooks.mutating(
        "mutating-config",
        webhook("work.example.io", config, [rule(["configmaps"])],
                admissionReviewVersions=["v1beta1"], timeoutSeconds=3),
    )  # fmt: skip
    ns = await hooks.namespace()
    resp = await create_cm(api, ns, "cm")
    assert resp.status_code == 201, resp.text
    assert resp.json()["metadata"]["labels"] == {"id": "w-1"}
    assert server.versions("mutate-work") == ["admission.k8s.io/v1beta1"]


async def test_scale_subresource_is_reviewed_as_scale_objects(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    def cap(request: JSON) -> JSON:
        if request["object"]["spec"]["replicas"] <= 3:
            return {"allowed": True}
        return json_patch([{"op": "replace", "path": "/spec/replicas", "value": 3}],
                          warnings=["capped at 3 replicas"])  # fmt: skip

    server.answer("cap", cap)
    await hooks.mutating(
        "cap",
        webhook("cap.example.com", hooks.url("cap"), [rule(["*/scale"], ("UPDATE",), "apps")]),
    )
    ns = await hooks.namespace()
    labels = {"app": "web"}
    deployment = {
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }  # fmt: skip
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    assert (await api.post(base, json=deployment)).status_code == 201
    assert server.calls("cap") == []
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale",
             "metadata": {"name": "web", "namespace": ns}, "spec": {"replicas": 10}}  # fmt: skip
    resp = await api.put(f"{base}/web/scale", json=scale)
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["replicas"] == 3
    assert resp.headers["warning"] == '299 - "capped at 3 replicas"'
    assert (await api.get(f"{base}/web")).json()["spec"]["replicas"] == 3
    (review,) = server.calls("cap")
    scale_kind = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert (review["kind"], review["requestKind"]) == (scale_kind, scale_kind)
    assert review["resource"] == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert review["subResource"] == "scale"
    assert review["object"]["kind"] == "Scale"
    assert review["oldObject"]["spec"]["replicas"] == 1


async def test_overlapping_resource_wildcards_are_refused(
    hooks: Hooks, api: httpx.AsyncClient
) -> None:
    overlapping = webhook("wild.example.com", hooks.url("x"), [rule(["pods/*", "pods/status"])])
    body = {"metadata": {"name": "wild"}, "webhooks": [overlapping]}
    resp = await api.post(f"{ADMISSION}/mutatingwebhookconfigurations", json=body)
    assert resp.status_code == 422
    assert resp.json()["message"] == (
        'MutatingWebhookConfiguration.admissionregistration.k8s.io "wild" is invalid: '
        "webhooks[0].rules[0].resources[1]: Invalid value: \"pods/status\": if 'pods/*' is "
        "present, must not specify pods/status"
    )


async def test_webhook_selectors_are_validated(hooks: Hooks, api: httpx.AsyncClient) -> None:
    selectors = {
        "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In"}]},
        "objectSelector": {"matchLabels": {"app": "-bad"},
                           "matchExpressions": [{"key": "x", "operator": "Near"}]},
    }  # fmt: skip
    hook = webhook("selectors.example.com", hooks.url("x"), [rule(["pods"])], **selectors)
    body = {"metadata": {"name": "selectors"}, "webhooks": [hook]}
    resp = await api.post(f"{ADMISSION}/validatingwebhookconfigurations", json=body)
    assert resp.status_code == 422
    causes = [f"{c['field']}: {c['message']}" for c in resp.json()["details"]["causes"]]
    assert causes[0] == (
        "webhooks[0].namespaceSelector.matchExpressions[0].values: Required value: must be "
        "specified when `operator` is 'In' or 'NotIn'"
    )
    assert causes[1].startswith('webhooks[0].objectSelector.matchLabels: Invalid value: "-bad": ')
    assert causes[2] == (
        'webhooks[0].objectSelector.matchExpressions[0].operator: Invalid value: "Near": not a '
        "valid selector operator"
    )
    assert len(causes) == 3


async def test_a_webhook_answering_with_an_http_error_fails_the_call(
    hooks: Hooks, server: WebhookServer, api: httpx.AsyncClient
) -> None:
    server.answer("broken", lambda r: {"http_status": 500, "text": "unknown"})
    await hooks.validating(
        "broken", webhook("broken.example.com", hooks.url("broken"), [rule(["configmaps"])])
    )
    ns = await hooks.namespace()
    assert_failure_policy(
        await create_cm(api, ns, "cm"), "Fail",
        'failed calling webhook "broken.example.com": failed to call webhook: an error on the '
        'server ("unknown") has prevented the request from succeeding',
    )  # fmt: skip
    server.answer("broken", lambda r: {"allowed": True, "uid": "someone-else"})
    resp = await create_cm(api, ns, "cm")
    assert resp.status_code == 500
    assert resp.json()["message"].startswith(
        'Internal error occurred: failed calling webhook "broken.example.com": received invalid '
        'webhook response: expected response.uid="'
    )
