"""Object semantics: create/get/update/patch/delete with kube-apiserver's answers."""

from __future__ import annotations

from emulator.apiserver import ApiServer

from .conftest import call, make_ns, status

CM = "/api/v1/namespaces/default/configmaps"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments"


def deployment(name: str, replicas: int = 1) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
        "status": {"replicas": 99},
    }


async def test_create_sets_system_fields_and_rv_is_monotonic(api: ApiServer) -> None:
    await make_ns(api, "default")
    code, a, resp = await call(api, "POST", CM, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    assert code == 201
    assert resp.headers["content-type"] == "application/json"
    assert a["kind"] == "ConfigMap"
    assert a["apiVersion"] == "v1"
    meta = a["metadata"]
    assert len(meta["uid"]) == 36
    assert meta["creationTimestamp"].endswith("Z")
    assert "generation" not in meta  # ConfigMaps do not track generation
    _, b, _ = await call(api, "POST", CM, {"metadata": {"name": "b"}})
    assert int(b["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    code, got, _ = await call(api, "GET", f"{CM}/a")
    assert code == 200
    assert got == a


async def test_not_found_and_already_exists(api: ApiServer) -> None:
    await make_ns(api, "default")
    code, body, _ = await call(api, "GET", f"{CM}/nope")
    assert (code, body) == (
        404,
        status(
            404, "NotFound", 'configmaps "nope" not found', {"name": "nope", "kind": "configmaps"}
        ),
    )
    await call(api, "POST", CM, {"metadata": {"name": "a"}})
    code, body, _ = await call(api, "POST", CM, {"metadata": {"name": "a"}})
    assert (code, body) == (
        409,
        status(
            409,
            "AlreadyExists",
            'configmaps "a" already exists',
            {"name": "a", "kind": "configmaps"},
        ),
    )
    code, body, _ = await call(api, "GET", f"{DEPLOY}/x")
    assert body["details"] == {"name": "x", "group": "apps", "kind": "deployments"}
    assert body["message"] == 'deployments.apps "x" not found'


async def test_create_in_missing_namespace_is_404_namespace(api: ApiServer) -> None:
    code, body, _ = await call(
        api, "POST", "/api/v1/namespaces/ghost/configmaps", {"metadata": {"name": "a"}}
    )
    assert (code, body) == (
        404,
        status(
            404, "NotFound", 'namespaces "ghost" not found', {"name": "ghost", "kind": "namespaces"}
        ),
    )


async def test_invalid_name_is_422_with_causes(api: ApiServer) -> None:
    await make_ns(api, "default")
    code, body, _ = await call(api, "POST", CM, {"metadata": {"name": "Bad_Name"}})
    assert code == 422
    assert body["reason"] == "Invalid"
    cause = body["details"]["causes"][0]
    assert cause["field"] == "metadata.name"
    assert cause["reason"] == "FieldValueInvalid"
    assert cause["message"].startswith('Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain')
    assert body["message"] == f'ConfigMap "Bad_Name" is invalid: metadata.name: {cause["message"]}'
    assert body["details"]["kind"] == "ConfigMap"
    assert body["details"]["name"] == "Bad_Name"
    code, body, _ = await call(api, "POST", CM, {"metadata": {}})
    assert body["message"] == (
        'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    )


async def test_generate_name(api: ApiServer) -> None:
    await make_ns(api, "default")
    names = set()
    for _ in range(5):
        code, body, _ = await call(api, "POST", CM, {"metadata": {"generateName": "x-"}})
        assert code == 201
        name = body["metadata"]["name"]
        assert name.startswith("x-")
        assert len(name) == 7
        names.add(name)
    assert len(names) == 5


async def test_generated_namespace_name_is_in_its_name_label(api: ApiServer) -> None:
    code, body, _ = await call(
        api, "POST", "/api/v1/namespaces", {"metadata": {"generateName": "t-"}}
    )
    assert code == 201, body
    name = body["metadata"]["name"]
    assert name.startswith("t-")
    assert body["metadata"]["labels"] == {"kubernetes.io/metadata.name": name}
    # The label follows the name on every write, whatever the client sends.
    body["metadata"]["labels"] = {"kubernetes.io/metadata.name": "other", "team": "a"}
    code, body, _ = await call(api, "PUT", f"/api/v1/namespaces/{name}", body)
    assert code == 200, body
    assert body["metadata"]["labels"] == {"kubernetes.io/metadata.name": name, "team": "a"}


async def test_namespace_mismatch_and_name_mismatch_are_400(api: ApiServer) -> None:
    await make_ns(api, "default")
    code, body, _ = await call(api, "POST", CM, {"metadata": {"name": "a", "namespace": "other"}})
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )
    await call(api, "POST", CM, {"metadata": {"name": "a"}})
    code, body, _ = await call(api, "PUT", f"{CM}/a", {"metadata": {"name": "b"}})
    assert (code, body["message"]) == (
        400,
        "the name of the object (b) does not match the name on the URL (a)",
    )


async def test_update_conflict_on_stale_rv_and_noop_keeps_rv(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, a, _ = await call(api, "POST", CM, {"metadata": {"name": "a"}, "data": {"k": "1"}})
    a["data"]["k"] = "2"
    code, a2, _ = await call(api, "PUT", f"{CM}/a", a)
    assert code == 200
    assert a2["data"] == {"k": "2"}
    assert int(a2["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    code, body, _ = await call(api, "PUT", f"{CM}/a", a)  # stale rv
    assert (code, body) == (
        409,
        status(
            409,
            "Conflict",
            'Operation cannot be fulfilled on configmaps "a": the object has been modified; '
            "please apply your changes to the latest version and try again",
            {"name": "a", "kind": "configmaps"},
        ),
    )
    code, same, _ = await call(api, "PUT", f"{CM}/a", a2)
    assert code == 200
    assert same["metadata"]["resourceVersion"] == a2["metadata"]["resourceVersion"]


async def test_put_missing_is_404_unless_create_on_update(api: ApiServer) -> None:
    await make_ns(api, "default")
    code, body, _ = await call(api, "PUT", f"{CM}/a", {"metadata": {"name": "a"}})
    assert code == 404
    assert body["reason"] == "NotFound"
    lease = "/apis/coordination.k8s.io/v1/namespaces/default/leases/l"
    code, body, _ = await call(api, "PUT", lease, {"metadata": {"name": "l"}, "spec": {}})
    assert code == 201
    assert body["kind"] == "Lease"


async def test_generation_and_status_split(api: ApiServer) -> None:
    await make_ns(api, "default")
    code, d, _ = await call(api, "POST", DEPLOY, deployment("web"))
    assert code == 201
    assert d["metadata"]["generation"] == 1
    # The client's status is dropped on create; the zero DeploymentStatus shows, as {}.
    assert d["status"] == {}
    # main write ignores status; label change does not bump generation
    d["status"] = {"replicas": 5}
    d["metadata"]["labels"] = {"x": "y"}
    _, d2, _ = await call(api, "PUT", f"{DEPLOY}/web", d)
    assert d2["metadata"]["generation"] == 1
    assert d2["status"] == {}
    assert d2["metadata"]["labels"] == {"x": "y"}
    # spec change bumps
    d2["spec"]["replicas"] = 3
    _, d3, _ = await call(api, "PUT", f"{DEPLOY}/web", d2)
    assert d3["metadata"]["generation"] == 2
    # annotations bump a Deployment's generation (copied to its ReplicaSets)
    d3["metadata"]["annotations"] = {"a": "b"}
    _, d4, _ = await call(api, "PUT", f"{DEPLOY}/web", d3)
    assert d4["metadata"]["generation"] == 3
    # /status writes only status; metadata and spec changes are ignored
    d4["status"] = {"replicas": 3, "readyReplicas": 3}
    d4["spec"]["replicas"] = 10
    d4["metadata"]["labels"] = {"changed": "yes"}
    code, d5, _ = await call(api, "PUT", f"{DEPLOY}/web/status", d4)
    assert code == 200
    assert d5["status"] == {"replicas": 3, "readyReplicas": 3}
    assert d5["spec"]["replicas"] == 3
    assert d5["metadata"]["labels"] == {"x": "y"}
    assert d5["metadata"]["generation"] == 3


async def test_scale_subresource(api: ApiServer) -> None:
    await make_ns(api, "default")
    await call(api, "POST", DEPLOY, deployment("web", 2))
    code, scale, _ = await call(api, "GET", f"{DEPLOY}/web/scale")
    assert code == 200
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0, "selector": "app=web"}
    scale["spec"]["replicas"] = 4
    code, out, _ = await call(api, "PUT", f"{DEPLOY}/web/scale", scale)
    assert code == 200
    assert out["spec"]["replicas"] == 4
    _, d, _ = await call(api, "GET", f"{DEPLOY}/web")
    assert d["spec"]["replicas"] == 4
    assert d["metadata"]["generation"] == 2
    code, body, _ = await call(
        api,
        "PATCH",
        f"{DEPLOY}/web/scale",
        {"spec": {"replicas": -1}},
        "application/merge-patch+json",
    )
    assert code == 422
    assert body["message"] == (
        'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be greater '
        "than or equal to 0"
    )


async def test_patch_types_and_415(api: ApiServer) -> None:
    await make_ns(api, "default")
    await call(api, "POST", CM, {"metadata": {"name": "a"}, "data": {"k": "1"}})
    code, out, _ = await call(
        api, "PATCH", f"{CM}/a", {"data": {"j": "2"}}, "application/merge-patch+json"
    )
    assert code == 200
    assert out["data"] == {"k": "1", "j": "2"}
    code, out, _ = await call(
        api,
        "PATCH",
        f"{CM}/a",
        [{"op": "remove", "path": "/data/k"}],
        "application/json-patch+json",
    )
    assert out["data"] == {"j": "2"}
    code, body, _ = await call(api, "PATCH", f"{CM}/a", {"data": {}}, "text/plain")
    assert code == 415
    assert body["reason"] == "UnsupportedMediaType"
    code, body, _ = await call(
        api, "PATCH", f"{CM}/nope", {"data": {}}, "application/merge-patch+json"
    )
    assert code == 404


async def test_apply_creates_and_requires_field_manager(api: ApiServer) -> None:
    await make_ns(api, "default")
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ap"}, "data": {"a": "1"}}
    code, body, _ = await call(api, "PATCH", f"{CM}/ap", obj, "application/apply-patch+yaml")
    assert code == 422
    assert body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for '
        "apply patch"
    )
    code, body, _ = await call(
        api, "PATCH", f"{CM}/ap?fieldManager=me", obj, "application/apply-patch+yaml"
    )
    assert code == 201
    assert body["data"] == {"a": "1"}
    assert body["metadata"]["managedFields"][0]["manager"] == "me"


async def test_apply_takes_json_and_yaml_in_flow_style(api: ApiServer) -> None:
    await make_ns(api, "default")
    # JSON (read as JSON) and YAML flow style that is not JSON (unquoted keys: read as YAML).
    as_json = (
        b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}, "data": {"a": "1"}}'
    )
    flow = b'{apiVersion: v1, kind: ConfigMap, metadata: {name: f}, data: {a: "2"}}'
    for name, body, value in (("j", as_json, "1"), ("f", flow, "2")):
        code, out, _ = await call(
            api, "PATCH", f"{CM}/{name}?fieldManager=me", body, "application/apply-patch+yaml"
        )
        assert code == 201, out
        assert out["data"] == {"a": value}
    code, out, _ = await call(
        api, "PATCH", f"{CM}/j?fieldManager=me", b"{a: [", "application/apply-patch+yaml"
    )
    assert code == 400
    assert out["message"].startswith("json: cannot unmarshal request body")


async def test_update_manager_from_user_agent(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, body, _ = await call(
        api, "POST", CM, {"metadata": {"name": "m"}}, user_agent="kubectl/v1.32.4 (linux/amd64)"
    )
    assert body["metadata"]["managedFields"][0] == {"manager": "kubectl", "operation": "Update"}


async def test_dry_run_stores_nothing(api: ApiServer) -> None:
    await make_ns(api, "default")
    rv = api.storage.revision
    code, body, _ = await call(api, "POST", f"{CM}?dryRun=All", {"metadata": {"name": "d"}})
    assert code == 201
    assert body["metadata"]["name"] == "d"
    assert api.storage.revision == rv
    code, _, _ = await call(api, "GET", f"{CM}/d")
    assert code == 404
    code, body, _ = await call(api, "POST", f"{CM}?dryRun=Some", {"metadata": {"name": "d"}})
    assert code == 422
    assert body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: '
        'supported values: "All"'
    )


async def test_delete_returns_status_or_object(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, cm, _ = await call(api, "POST", CM, {"metadata": {"name": "a"}})
    code, body, _ = await call(api, "DELETE", f"{CM}/a")
    assert code == 200
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "a", "kind": "configmaps", "uid": cm["metadata"]["uid"]},
    }
    code, _, _ = await call(api, "DELETE", f"{CM}/a")
    assert code == 404


async def test_delete_preconditions(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, cm, _ = await call(api, "POST", CM, {"metadata": {"name": "a"}})
    code, body, _ = await call(api, "DELETE", f"{CM}/a", {"preconditions": {"uid": "other"}})
    assert code == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "a": Precondition failed: UID in '
        f"precondition: other, UID in object meta: {cm['metadata']['uid']}"
    )
    code, body, _ = await call(api, "DELETE", f"{CM}/a?propagationPolicy=Sideways")
    assert code == 422
    assert body["details"]["causes"][0]["field"] == "propagationPolicy"


async def test_finalizers_keep_object_until_removed(api: ApiServer) -> None:
    await make_ns(api, "default")
    await call(
        api,
        "POST",
        DEPLOY,
        {**deployment("f"), "metadata": {"name": "f", "finalizers": ["x.io/hold"]}},
    )
    code, body, _ = await call(api, "DELETE", f"{DEPLOY}/f")
    assert code == 200
    assert body["kind"] == "Deployment"
    assert body["metadata"]["deletionTimestamp"].endswith("Z")
    assert body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert body["metadata"]["generation"] == 2
    # no new finalizers while deleting
    body["metadata"]["finalizers"] = ["x.io/hold", "x.io/new"]
    code, err, _ = await call(api, "PUT", f"{DEPLOY}/f", body)
    assert code == 422
    assert err["details"]["causes"][0]["field"] == "metadata.finalizers"
    code, _out, _ = await call(
        api,
        "PATCH",
        f"{DEPLOY}/f",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    assert code == 200
    code, _, _ = await call(api, "GET", f"{DEPLOY}/f")
    assert code == 404


async def test_unknown_fields_warn_strict_ignore(api: ApiServer) -> None:
    class Schema:
        def field(self, path: tuple[str, ...]):  # type: ignore[no-untyped-def]
            from emulator.fieldmeta import UNKNOWN

            return UNKNOWN

        def validate(self, obj):  # type: ignore[no-untyped-def]
            if obj.get("data", {}).get("bad"):
                return [
                    {
                        "reason": "FieldValueInvalid",
                        "field": "data.bad",
                        "message": 'Invalid value: "x": nope',
                    }
                ]
            return []

        def prune(self, obj):  # type: ignore[no-untyped-def]
            return ["spec.foo"] if obj.pop("spec", None) is not None else []

        def default(self, obj):  # type: ignore[no-untyped-def]
            obj.setdefault("data", {}).setdefault("defaulted", "yes")

    rt = api.registry.lookup("", "v1", "configmaps")
    assert rt is not None
    rt.schema = Schema()
    await make_ns(api, "default")
    code, body, resp = await call(api, "POST", CM, {"metadata": {"name": "w"}, "spec": {"foo": 1}})
    assert code == 201
    assert resp.headers["warning"] == '299 - "unknown field \\"spec.foo\\""'
    assert body["data"] == {"defaulted": "yes"}
    assert "spec" not in body
    code, body, _ = await call(
        api, "POST", f"{CM}?fieldValidation=Strict", {"metadata": {"name": "s"}, "spec": {"foo": 1}}
    )
    assert (code, body["reason"], body["message"]) == (
        400,
        "BadRequest",
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
        'unknown field "spec.foo"',
    )
    code, body, resp = await call(
        api, "POST", f"{CM}?fieldValidation=Ignore", {"metadata": {"name": "i"}, "spec": {"foo": 1}}
    )
    assert code == 201
    assert "warning" not in resp.headers
    code, body, _ = await call(api, "POST", CM, {"metadata": {"name": "v"}, "data": {"bad": "x"}})
    assert code == 422
    assert body["message"] == 'ConfigMap "v" is invalid: data.bad: Invalid value: "x": nope'


async def test_unknown_resource_and_method(api: ApiServer) -> None:
    code, body, _ = await call(api, "GET", "/api/v1/foos")
    # kube-apiserver sends an empty details object for an unknown resource.
    assert (code, body) == (
        404,
        status(404, "NotFound", "the server could not find the requested resource", {}),
    )
    code, body, _ = await call(
        api, "DELETE", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews/x"
    )
    assert code == 405
    assert body["reason"] == "MethodNotAllowed"


async def test_csr_user_and_approval(api: ApiServer) -> None:
    import json

    from emulator.wire import ApiRequest, UserInfo

    path = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
    csr = {
        "metadata": {"name": "c"},
        "spec": {
            "request": "cmVx",
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
            "username": "spoof",
        },
    }
    req = ApiRequest.from_target(
        "POST", path, body=json.dumps(csr).encode(), headers={"content-type": "application/json"}
    )
    req.user = UserInfo("system:bootstrap:abc", ("system:bootstrappers",))
    resp = await api.handle(req)
    created = json.loads(resp.body)
    assert resp.status == 201
    assert created["spec"]["username"] == "system:bootstrap:abc"
    assert created["spec"]["groups"] == ["system:bootstrappers"]
    approved = dict(created)
    approved["status"] = {
        "conditions": [{"type": "Approved", "status": "True", "reason": "r"}],
        "certificate": "Zm9v",
    }
    code, out, _ = await call(api, "PUT", f"{path}/c/approval", approved)
    assert code == 200
    assert out["status"]["conditions"][0]["type"] == "Approved"
    assert "certificate" not in out["status"]
    out["status"]["conditions"] = []
    out["status"]["certificate"] = "Zm9v"
    code, out2, _ = await call(api, "PUT", f"{path}/c/status", out)
    assert out2["status"]["certificate"] == "Zm9v"
    assert [c["type"] for c in out2["status"]["conditions"]] == ["Approved"]


_POD_TEMPLATE = {
    "metadata": {"labels": {"app": "z"}},
    "spec": {"containers": [{"name": "c", "image": "nginx"}], "restartPolicy": "Never"},
}
_SELECTOR = {"matchLabels": {"app": "z"}}

# The zero status each type shows on create: the Go status struct is never left out, and its
# fields without `omitempty` appear at zero (k8s.io/api JSON tags).
ZERO_STATUSES = [
    ("/apis/apps/v1", "deployments", {"selector": _SELECTOR, "template": _POD_TEMPLATE}, {}),
    (
        "/apis/apps/v1",
        "statefulsets",
        {"selector": _SELECTOR, "template": _POD_TEMPLATE, "serviceName": "z"},
        {"replicas": 0, "availableReplicas": 0},
    ),
    (
        "/apis/apps/v1",
        "daemonsets",
        {"selector": _SELECTOR, "template": _POD_TEMPLATE},
        {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        },
    ),
    (
        "/apis/apps/v1",
        "replicasets",
        {"selector": _SELECTOR, "template": _POD_TEMPLATE},
        {"replicas": 0},
    ),
    ("/apis/batch/v1", "jobs", {"template": _POD_TEMPLATE}, {}),
    (
        "/apis/batch/v1",
        "cronjobs",
        {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": _POD_TEMPLATE}}},
        {},
    ),
    (
        "/apis/networking.k8s.io/v1",
        "ingresses",
        {"defaultBackend": {"service": {"name": "z", "port": {"number": 80}}}},
        {"loadBalancer": {}},
    ),
    (
        "/apis/policy/v1",
        "poddisruptionbudgets",
        {"selector": _SELECTOR, "minAvailable": 1},
        {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
    ),
]


async def test_new_objects_show_their_zero_status(api: ApiServer) -> None:
    await make_ns(api, "default")
    for prefix, resource, spec, zero in ZERO_STATUSES:
        body = {"metadata": {"name": "z"}, "spec": spec, "status": {"bogus": 1}}
        code, created, _ = await call(api, "POST", f"{prefix}/namespaces/default/{resource}", body)
        assert code == 201, (resource, created)
        assert created["status"] == zero, resource
        _, read, _ = await call(api, "GET", f"{prefix}/namespaces/default/{resource}/z")
        assert read["status"] == zero, resource
