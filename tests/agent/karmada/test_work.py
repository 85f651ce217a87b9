from typing import Any

import pytest

from agent.karmada import work as w


def a_work(*manifests: Any, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "web", "namespace": "karmada-es-m1"},
        "spec": {"workload": {"manifests": list(manifests)}, **spec},
    }


DEPLOY: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "resourceVersion": "12",
        "uid": "x",
        "labels": {"resourcetemplate.karmada.io/retain-replicas": "true"},
        "annotations": {"work.karmada.io/conflict-resolution": "overwrite"},
    },
    "spec": {"replicas": 3},
    "status": {"replicas": 1},
}
NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "foos.example.com"},
}


def test_parse_and_identifier() -> None:
    parsed = w.manifests_of(a_work(DEPLOY, NS, {"kind": "X"}, "junk"))
    deploy, ns, no_version, junk = parsed
    assert isinstance(deploy, w.Manifest)
    assert isinstance(ns, w.Manifest)
    assert deploy.identifier("deployments") == {
        "ordinal": 0,
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
        "resource": "deployments",
        "namespace": "shop",
        "name": "web",
    }
    assert ns.identifier("namespaces") == {
        "ordinal": 1,
        "version": "v1",
        "kind": "Namespace",
        "resource": "namespaces",
        "name": "shop",
    }
    assert isinstance(no_version, w.ManifestError)
    assert "no apiVersion" in str(no_version)
    assert isinstance(junk, w.ManifestError)


def test_apply_order_puts_namespaces_and_crds_first() -> None:
    parsed = [m for m in w.manifests_of(a_work(DEPLOY, CRD, NS)) if isinstance(m, w.Manifest)]
    assert [m.kind for m in w.apply_order(parsed)] == [
        "Namespace",
        "CustomResourceDefinition",
        "Deployment",
    ]


def test_desired_object_strips_server_fields_and_marks_ownership() -> None:
    work = a_work(DEPLOY)
    manifest = w.manifests_of(work)[0]
    assert isinstance(manifest, w.Manifest)
    fresh = w.desired_object(manifest, work, live=None)
    assert "status" not in fresh
    assert "resourceVersion" not in fresh["metadata"]
    assert "uid" not in fresh["metadata"]
    assert fresh["metadata"]["labels"]["karmada.io/managed"] == "true"
    assert fresh["metadata"]["annotations"] == {
        "work.karmada.io/namespace": "karmada-es-m1",
        "work.karmada.io/name": "web",
    }
    assert fresh["spec"]["replicas"] == 3  # created with the template's replicas
    existing = w.desired_object(manifest, work, live={"spec": {"replicas": 7}})
    assert existing["spec"]["replicas"] == 7  # retain-replicas: the member's value is kept
    assert DEPLOY["metadata"]["resourceVersion"] == "12"  # input untouched


def test_ownership_guard_inputs() -> None:
    work = a_work(DEPLOY, NS)
    deploy, ns = w.manifests_of(work)
    assert isinstance(deploy, w.Manifest)
    assert isinstance(ns, w.Manifest)
    assert w.may_overwrite(deploy, work)
    assert not w.may_overwrite(ns, work)
    assert w.is_managed({"metadata": {"labels": {"karmada.io/managed": "true"}}})
    assert not w.is_managed({"metadata": {}})


def test_release_patch_removes_only_karmada_metadata() -> None:
    live = {
        "metadata": {
            "labels": {
                "karmada.io/managed": "true",
                "app": "web",
                "work.karmada.io/permanent-id": "u",
            },
            "annotations": {"work.karmada.io/name": "web", "note": "keep"},
        }
    }
    assert w.release_patch(live) == {
        "metadata": {
            "labels": {"work.karmada.io/permanent-id": None, "karmada.io/managed": None},
            "annotations": {"work.karmada.io/name": None},
        }
    }
    assert w.release_patch({"metadata": {"labels": {"app": "x"}}}) is None


@pytest.mark.parametrize(
    ("ok", "total", "errors", "message"),
    [
        (2, 2, [], "Manifest has been successfully applied"),
        (1, 2, ["boom"], "Failed to apply all manifests (1/2): boom"),
        (0, 2, ["a", "b"], "Failed to apply all manifests (0/2): [a, b]"),
    ],
)
def test_applied_message(ok: int, total: int, errors: list[str], message: str) -> None:
    assert w.applied_message(ok, total, errors) == message


def test_dispatching_condition() -> None:
    assert w.dispatching_condition(a_work())["status"] == "True"
    suspended = w.dispatching_condition(a_work(suspendDispatching=True))
    assert (suspended["status"], suspended["reason"]) == ("False", "SuspendDispatching")


def test_deduplicate_applies_identical_once_and_refuses_differing() -> None:
    from agent.karmada.work import Manifest, deduplicate, parse_manifest

    def cm(name: str, value: str) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"v": value},
        }

    raw = [cm("a", "1"), cm("b", "1"), cm("a", "1"), cm("c", "1"), cm("c", "2"), cm("c", "1")]
    manifests: list[Manifest] = [parse_manifest(i, m) for i, m in enumerate(raw)]
    grouped = deduplicate(manifests)
    assert [m.ordinal for m in grouped.unique] == [0, 1]
    assert grouped.copies == {2: 0}
    assert grouped.conflicts == [
        (
            [3, 4, 5],
            "manifests 3, 4 and 5 describe the same object ConfigMap default/c with different "
            "content; none of them is applied",
        )
    ]


def test_deduplicate_keys_cluster_scoped_kinds_without_their_namespace() -> None:
    """A stray metadata.namespace on a cluster-scoped object names nothing: two copies of one
    ClusterRole are the same object whatever namespace each says."""
    from agent.karmada.work import deduplicate, parse_manifest

    def role(verbs: list[str], **meta: str) -> dict[str, object]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "dupcr", **meta},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}],
        }

    differing = [parse_manifest(0, role(["get"])), parse_manifest(1, role(["list"], namespace="x"))]
    grouped = deduplicate(differing, {0, 1})
    assert grouped.unique == []
    assert grouped.conflicts == [
        (
            [0, 1],
            "manifests 0 and 1 describe the same object ClusterRole dupcr with different "
            "content; none of them is applied",
        )
    ]
    same = [parse_manifest(0, role(["get"])), parse_manifest(1, role(["get"], namespace="x"))]
    grouped = deduplicate(same, {0, 1})
    assert [m.ordinal for m in grouped.unique] == [0]
    assert grouped.copies == {1: 0}
    # Scope unknown (not given): the namespaces as written tell them apart.
    assert len(deduplicate(differing).unique) == 2
