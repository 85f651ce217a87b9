"""kubectl and the Python client against the karmada profile with Karmada's published CRDs
(the all_crds option): discovery, apply and get with the CRDs' printer columns and defaults,
status through the status subresource, schema validation, pruning and field validation, each
as kube-apiserver answers them for any CRD."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from emulator.emulator import Emulator, run_emulator

from .kubectl import Kubectl, version_params

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
versions = pytest.mark.parametrize("version", version_params())


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emu() -> AsyncIterator[Emulator]:
    async with run_emulator("karmada", all_crds=True) as emulator:
        yield emulator


def policy_selecting_nginx(kind: str, ns: str, name: str) -> str:
    return f"""apiVersion: policy.karmada.io/v1alpha1
kind: {kind}
metadata:
  name: {name}
  namespace: {ns}
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: nginx
"""


def propagation_policy(ns: str, name: str = "nginx", spec_extra: str = "") -> str:
    return (
        policy_selecting_nginx("PropagationPolicy", ns, name)
        + f"""  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    replicaScheduling:
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - targetCluster: {{clusterNames: [member1]}}
          weight: 2
{spec_extra}"""
    )


def override_policy(ns: str) -> str:
    return (
        policy_selecting_nginx("OverridePolicy", ns, "nginx")
        + """  overrideRules:
  - targetCluster:
      clusterNames: [member1]
    overriders:
      imageOverrider:
      - component: Registry
        operator: replace
        value: registry.example.io
      plaintext:
      - path: /spec/replicas
        operator: replace
        value: {nested: [1, 2]}
"""
    )


def resource_binding(ns: str) -> str:
    return f"""apiVersion: work.karmada.io/v1alpha2
kind: ResourceBinding
metadata:
  name: nginx-deployment
  namespace: {ns}
spec:
  resource:
    apiVersion: apps/v1
    kind: Deployment
    name: nginx
    namespace: {ns}
  replicas: 2
  clusters:
  - name: member1
    replicas: 2
status:
  conditions:
  - type: Scheduled
    status: "True"
    reason: Success
    message: dropped on create
    lastTransitionTime: "2025-01-01T00:00:00Z"
"""


BINDING_STATUS = {
    "status": {
        "conditions": [
            {
                "type": "Scheduled",
                "status": "True",
                "reason": "Success",
                "message": "Binding has been scheduled successfully.",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            },
            {
                "type": "FullyApplied",
                "status": "True",
                "reason": "FullyAppliedSuccess",
                "message": "All works have been successfully applied",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            },
        ],
        "aggregatedStatus": [
            {
                "clusterName": "member1",
                "applied": True,
                "health": "Healthy",
                "status": {"readyReplicas": 2, "anything": {"kept": True}},
            }
        ],
        "schedulerObservedGeneration": 1,
    }
}


async def kubectl_in_new_ns(version: str, kubeconfig: Path, ns: str) -> Kubectl:
    k = Kubectl(version, kubeconfig)
    assert (await k.ok("create", "namespace", ns)).strip() == f"namespace/{ns} created"
    return k


async def apply_new(k: Kubectl, manifest: str, created: str) -> None:
    assert (await k.ok("apply", "-f", "-", stdin=manifest)).strip() == f"{created} created"


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines()]


@versions
async def test_api_resources_lists_karmadas_kinds_with_their_short_names(
    version: str, admin_kubeconfig: Path
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    out = await k.ok("api-resources", "--categories=karmada-io", "--no-headers")
    listed = sorted(rows(out))
    assert listed == sorted(
        [
            ["clusteroverridepolicies", "cop", "policy.karmada.io/v1alpha1", "false",
             "ClusterOverridePolicy"],
            ["clusterpropagationpolicies", "cpp", "policy.karmada.io/v1alpha1", "false",
             "ClusterPropagationPolicy"],
            ["federatedresourcequotas", "policy.karmada.io/v1alpha1", "true",
             "FederatedResourceQuota"],
            ["overridepolicies", "op", "policy.karmada.io/v1alpha1", "true", "OverridePolicy"],
            ["propagationpolicies", "pp", "policy.karmada.io/v1alpha1", "true",
             "PropagationPolicy"],
            ["clusterresourcebindings", "crb", "work.karmada.io/v1alpha2", "false",
             "ClusterResourceBinding"],
            ["resourcebindings", "rb", "work.karmada.io/v1alpha2", "true", "ResourceBinding"],
            ["works", "wk", "work.karmada.io/v1alpha1", "true", "Work"],
            ["resourceinterpretercustomizations", "ric", "config.karmada.io/v1alpha1", "false",
             "ResourceInterpreterCustomization"],
            ["resourceinterpreterwebhookconfigurations", "config.karmada.io/v1alpha1", "false",
             "ResourceInterpreterWebhookConfiguration"],
            ["multiclusteringresses", "mci", "networking.karmada.io/v1alpha1", "true",
             "MultiClusterIngress"],
            ["multiclusterservices", "mcs", "networking.karmada.io/v1alpha1", "true",
             "MultiClusterService"],
        ]
    )  # fmt: skip
    # ClusterTaintPolicy declares no category upstream, so only its group lists it.
    policy = rows(await k.ok("api-resources", "--api-group=policy.karmada.io", "--no-headers"))
    assert [
        "clustertaintpolicies",
        "policy.karmada.io/v1alpha1",
        "false",
        "ClusterTaintPolicy",
    ] in (policy)
    assert len(policy) == 6
    versions_out = await k.ok("api-versions")
    assert {"work.karmada.io/v1alpha1", "work.karmada.io/v1alpha2"} <= set(versions_out.split())


@versions
async def test_propagation_policy_applies_with_the_crds_defaults_and_columns(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = await kubectl_in_new_ns(version, admin_kubeconfig, ns)
    await apply_new(k, propagation_policy(ns), "propagationpolicy.policy.karmada.io/nginx")
    table = rows(await k.ok("get", "pp", "-n", ns))
    assert table[0] == ["NAME", "CONFLICT-RESOLUTION", "PRIORITY", "AGE"]
    assert table[1][:3] == ["nginx", "Abort", "0"]
    spec = json.loads(await k.ok("get", "propagationpolicy", "nginx", "-n", ns, "-o", "json"))[
        "spec"
    ]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["preemption"] == "Never"
    assert spec["placement"]["replicaScheduling"]["replicaSchedulingType"] == "Divided"
    assert spec["placement"]["replicaScheduling"]["weightPreference"] == {
        "staticWeightList": [{"targetCluster": {"clusterNames": ["member1"]}, "weight": 2}]
    }
    changed = propagation_policy(ns).replace("weight: 2", "weight: 3")
    out = await k.ok("apply", "-f", "-", stdin=changed)
    assert out.strip() == "propagationpolicy.policy.karmada.io/nginx configured"
    generation = await k.ok("get", "pp", "nginx", "-n", ns, "-o", "jsonpath={.metadata.generation}")
    assert generation == "2"


@versions
async def test_override_policy_applies_and_keeps_free_form_values(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = await kubectl_in_new_ns(version, admin_kubeconfig, ns)
    await apply_new(k, override_policy(ns), "overridepolicy.policy.karmada.io/nginx")
    assert rows(await k.ok("get", "op", "-n", ns))[0] == ["NAME", "AGE"]
    overriders = json.loads(
        await k.ok(
            "get", "op", "nginx", "-n", ns, "-o", "jsonpath={.spec.overrideRules[0].overriders}"
        )
    )
    assert overriders == {
        "imageOverrider": [
            {"component": "Registry", "operator": "replace", "value": "registry.example.io"}
        ],
        "plaintext": [
            {"path": "/spec/replicas", "operator": "replace", "value": {"nested": [1, 2]}}
        ],
    }


@versions
async def test_resource_binding_status_goes_through_the_status_subresource(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = await kubectl_in_new_ns(version, admin_kubeconfig, ns)
    await apply_new(k, resource_binding(ns), "resourcebinding.work.karmada.io/nginx-deployment")
    # The status subresource: a create drops the status it is given.
    assert await k.ok("get", "rb", "nginx-deployment", "-n", ns, "-o", "jsonpath={.status}") == ""
    table = rows(await k.ok("get", "rb", "-n", ns))
    assert table == [
        ["NAME", "SCHEDULED", "FULLYAPPLIED", "AGE"],
        ["nginx-deployment", table[1][1]],
    ]
    out = await k.ok(
        "patch", "rb", "nginx-deployment", "-n", ns, "--subresource=status", "--type=merge",
        "-p", json.dumps(BINDING_STATUS),
    )  # fmt: skip
    assert out.strip() == "resourcebinding.work.karmada.io/nginx-deployment patched"
    table = rows(await k.ok("get", "rb", "-n", ns))
    assert table[1][:3] == ["nginx-deployment", "True", "True"]
    got = json.loads(await k.ok("get", "rb", "nginx-deployment", "-n", ns, "-o", "json"))
    assert got["status"] == BINDING_STATUS["status"]
    assert got["metadata"]["generation"] == 1
    # The main resource ignores status, the status subresource ignores spec.
    await k.ok(
        "patch", "rb", "nginx-deployment", "-n", ns, "--type=merge",
        "-p", '{"spec":{"replicas":3},"status":{"schedulerObservedGeneration":9}}',
    )  # fmt: skip
    await k.ok(
        "patch", "rb", "nginx-deployment", "-n", ns, "--subresource=status", "--type=merge",
        "-p", '{"spec":{"replicas":5},"status":{"schedulerObservedGeneration":2}}',
    )  # fmt: skip
    got = json.loads(await k.ok("get", "rb", "nginx-deployment", "-n", ns, "-o", "json"))
    assert (got["spec"]["replicas"], got["status"]["schedulerObservedGeneration"]) == (3, 2)
    assert got["metadata"]["generation"] == 2
    # The status is validated against the schema too.
    bad = await k(
        "patch", "rb", "nginx-deployment", "-n", ns, "--subresource=status", "--type=merge",
        "-p", '{"status":{"aggregatedStatus":[{"clusterName":"member1","health":"Fine"}],'
        '"schedulerObservedGeneration":"one"}}',
    )  # fmt: skip
    assert bad.rc == 1
    assert bad.err.splitlines() == [
        'The ResourceBinding "nginx-deployment" is invalid: ',
        '* status.aggregatedStatus[0].health: Unsupported value: "Fine": supported values: '
        '"Healthy", "Unhealthy", "Unknown"',
        '* status.schedulerObservedGeneration: Invalid value: "string": '
        'status.schedulerObservedGeneration in body must be of type integer: "string"',
    ]
    # v1alpha1 is served too, with the stored object shown at that version.
    older = json.loads(
        await k.ok(
            "get", "resourcebindings.v1alpha1.work.karmada.io", "nginx-deployment", "-n", ns,
            "-o", "json",
        )
    )  # fmt: skip
    assert older["apiVersion"] == "work.karmada.io/v1alpha1"
    assert rows(await k.ok("get", "resourcebindings.v1alpha1.work.karmada.io", "-n", ns))[0] == [
        "NAME",
        "AGE",
    ]


@versions
async def test_schema_validation_rejects_invalid_objects_with_kubes_messages(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = await kubectl_in_new_ns(version, admin_kubeconfig, ns)
    wrong = propagation_policy(ns, "wrong", "  priority: high\n  conflictResolution: Replace\n")
    bad = await k("apply", "-f", "-", stdin=wrong)
    assert bad.rc == 1
    assert bad.err.splitlines() == [
        'The PropagationPolicy "wrong" is invalid: ',
        '* spec.conflictResolution: Unsupported value: "Replace": supported values: "Abort", '
        '"Overwrite"',
        '* spec.priority: Invalid value: "string": spec.priority in body must be of type '
        'integer: "string"',
    ]
    empty = (
        f"apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\n"
        f"metadata: {{name: empty, namespace: {ns}}}\nspec: {{resourceSelectors: []}}\n"
    )
    bad = await k("create", "-f", "-", stdin=empty)
    assert bad.rc == 1
    assert bad.err.strip() == (
        'The PropagationPolicy "empty" is invalid: spec.resourceSelectors: Invalid value: 0: '
        "spec.resourceSelectors in body should have at least 1 items"
    )
    no_spec = (
        f"apiVersion: work.karmada.io/v1alpha2\nkind: ResourceBinding\n"
        f"metadata: {{name: nothing, namespace: {ns}}}\n"
    )
    bad = await k("create", "-f", "-", stdin=no_spec)
    assert bad.rc == 1
    assert bad.err.strip() == 'The ResourceBinding "nothing" is invalid: spec: Required value'
    bad = await k("get", "pp", "-n", ns, "-o", "name")
    assert bad.out == ""


@versions
async def test_unknown_fields_are_pruned_as_for_any_crd(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = await kubectl_in_new_ns(version, admin_kubeconfig, ns)
    extra = propagation_policy(ns, "extra", "  colour: blue\n").replace(
        "    name: nginx\n", "    name: nginx\n    shape: round\n"
    )
    strict = await k("create", "-f", "-", "--validate=strict", stdin=extra)
    assert strict.rc == 1
    assert strict.err.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": PropagationPolicy in '
        'version "v1alpha1" cannot be handled as a PropagationPolicy: strict decoding error: '
        'unknown field "spec.colour", unknown field "spec.resourceSelectors[0].shape"'
    )
    warned = await k("create", "-f", "-", "--validate=warn", stdin=extra)
    assert warned.rc == 0, warned.text
    assert re.findall(r"^Warning: .*$", warned.err, re.M) == [
        'Warning: unknown field "spec.colour"',
        'Warning: unknown field "spec.resourceSelectors[0].shape"',
    ]
    spec = json.loads(await k.ok("get", "pp", "extra", "-n", ns, "-o", "jsonpath={.spec}"))
    assert "colour" not in spec
    replaced = await k("replace", "-f", "-", "--validate=strict", stdin=extra)
    assert replaced.rc == 1
    assert replaced.err.strip() == (
        'Error from server (BadRequest): error when replacing "STDIN": PropagationPolicy in '
        'version "v1alpha1" cannot be handled as a PropagationPolicy: strict decoding error: '
        'unknown field "spec.colour", unknown field "spec.resourceSelectors[0].shape"'
    )
    assert spec["resourceSelectors"] == [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}
    ]
    quiet = await k(
        "create", "-f", "-", "--validate=false",
        stdin=extra.replace("name: extra", "name: quiet"),
    )  # fmt: skip
    assert (quiet.rc, quiet.err) == (0, "")
    spec = json.loads(await k.ok("get", "pp", "quiet", "-n", ns, "-o", "jsonpath={.spec}"))
    assert "colour" not in spec


async def test_python_client_writes_bindings_and_their_status(admin_kubeconfig: Path) -> None:
    """The official Python client's CustomObjectsApi, as a controller built on the CRDs uses
    them: namespaced and cluster-scoped bindings, status through /status, both versions."""
    configuration = client.Configuration()
    await asyncio.to_thread(
        config.load_kube_config,
        config_file=str(admin_kubeconfig),
        client_configuration=configuration,
    )
    custom = client.CustomObjectsApi(client.ApiClient(configuration))
    core = client.CoreV1Api(custom.api_client)
    ns = "pyclient-bindings"
    await asyncio.to_thread(
        core.create_namespace, client.V1Namespace(metadata=client.V1ObjectMeta(name=ns))
    )
    group = "work.karmada.io"
    binding = yaml.safe_load(resource_binding(ns))
    created = await asyncio.to_thread(
        custom.create_namespaced_custom_object, group, "v1alpha2", ns, "resourcebindings", binding
    )
    assert "status" not in created
    assert created["spec"]["conflictResolution"] == "Abort"
    patched = await asyncio.to_thread(
        custom.patch_namespaced_custom_object_status,
        group, "v1alpha2", ns, "resourcebindings", "nginx-deployment", BINDING_STATUS,
    )  # fmt: skip
    assert patched["status"] == BINDING_STATUS["status"]
    older = await asyncio.to_thread(
        custom.get_namespaced_custom_object,
        group, "v1alpha1", ns, "resourcebindings", "nginx-deployment",
    )  # fmt: skip
    assert older["apiVersion"] == "work.karmada.io/v1alpha1"
    with pytest.raises(ApiException) as exc:
        await asyncio.to_thread(
            custom.patch_namespaced_custom_object_status,
            group, "v1alpha2", ns, "resourcebindings", "nginx-deployment",
            {"status": {"conditions": [{"type": "Scheduled", "status": "Maybe"}]}},
        )  # fmt: skip
    assert exc.value.status == 422
    causes = json.loads(exc.value.body)["details"]["causes"]
    assert {c["field"] for c in causes} == {
        f"status.conditions[0].{name}" for name in ("lastTransitionTime", "message", "reason",
                                                   "status")
    }  # fmt: skip

    cluster_binding = {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ClusterResourceBinding",
        "metadata": {"name": "reader"},
        "spec": {
            "resource": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                         "name": "reader"},
        },
    }  # fmt: skip
    created = await asyncio.to_thread(
        custom.create_cluster_custom_object, group, "v1alpha2", "clusterresourcebindings",
        cluster_binding,
    )  # fmt: skip
    assert "namespace" not in created["metadata"]
    created["status"] = {"schedulerObservedGeneration": 1}
    replaced = await asyncio.to_thread(
        custom.replace_cluster_custom_object_status,
        group, "v1alpha2", "clusterresourcebindings", "reader", created,
    )  # fmt: skip
    assert replaced["status"] == {"schedulerObservedGeneration": 1}
    assert replaced["metadata"]["generation"] == 1
