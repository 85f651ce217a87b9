"""Karmada's published CRDs as data: what each file declares, and the profile option that
installs them (the default karmada profile keeps only the kinds the agent uses)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from emulator.__main__ import parse_args
from emulator.emulator import run_emulator
from emulator.karmada import crds
from emulator.profiles import profile_by_name
from emulator.schema import crd_schema

# plural.group -> (kind, scope, short names, served versions, storage version, subresources)
EXPECTED = {
    "propagationpolicies.policy.karmada.io": (
        "PropagationPolicy", "Namespaced", ["pp"], ["v1alpha1"], "v1alpha1", {}),
    "clusterpropagationpolicies.policy.karmada.io": (
        "ClusterPropagationPolicy", "Cluster", ["cpp"], ["v1alpha1"], "v1alpha1", {}),
    "overridepolicies.policy.karmada.io": (
        "OverridePolicy", "Namespaced", ["op"], ["v1alpha1"], "v1alpha1", None),
    "clusteroverridepolicies.policy.karmada.io": (
        "ClusterOverridePolicy", "Cluster", ["cop"], ["v1alpha1"], "v1alpha1", None),
    "federatedresourcequotas.policy.karmada.io": (
        "FederatedResourceQuota", "Namespaced", None, ["v1alpha1"], "v1alpha1", {"status": {}}),
    "clustertaintpolicies.policy.karmada.io": (
        "ClusterTaintPolicy", "Cluster", None, ["v1alpha1"], "v1alpha1", None),
    "works.work.karmada.io": (
        "Work", "Namespaced", ["wk"], ["v1alpha1"], "v1alpha1", {"status": {}}),
    "resourcebindings.work.karmada.io": (
        "ResourceBinding", "Namespaced", ["rb"], ["v1alpha1", "v1alpha2"], "v1alpha2",
        {"status": {}}),
    "clusterresourcebindings.work.karmada.io": (
        "ClusterResourceBinding", "Cluster", ["crb"], ["v1alpha1", "v1alpha2"], "v1alpha2",
        {"status": {}}),
    "resourceinterpretercustomizations.config.karmada.io": (
        "ResourceInterpreterCustomization", "Cluster", ["ric"], ["v1alpha1"], "v1alpha1", {}),
    "resourceinterpreterwebhookconfigurations.config.karmada.io": (
        "ResourceInterpreterWebhookConfiguration", "Cluster", None, ["v1alpha1"], "v1alpha1",
        None),
    "multiclusteringresses.networking.karmada.io": (
        "MultiClusterIngress", "Namespaced", ["mci"], ["v1alpha1"], "v1alpha1", {"status": {}}),
    "multiclusterservices.networking.karmada.io": (
        "MultiClusterService", "Namespaced", ["mcs"], ["v1alpha1"], "v1alpha1", {"status": {}}),
}  # fmt: skip

_PROVENANCE = re.compile(
    r"^# karmada-io/karmada charts/karmada/_crds/bases/\w+/(?P<file>[\w.]+\.yaml)\b.*?"
    r"\b[0-9a-f]{40}\b",
    re.S,
)


def test_published_crds_declare_upstream_names_scopes_and_versions() -> None:
    published = crds.published_crds()
    assert {crd["metadata"]["name"] for crd in published} == set(EXPECTED)
    for crd in published:
        name = crd["metadata"]["name"]
        kind, scope, short_names, served, storage, subresources = EXPECTED[name]
        spec = crd["spec"]
        plural, group = name.split(".", 1)
        assert spec["group"] == group
        assert spec["scope"] == scope
        assert spec["names"]["kind"] == kind
        assert spec["names"]["plural"] == plural
        assert spec["names"]["singular"] == kind.lower()
        assert spec["names"]["listKind"] == kind + "List"
        # ClusterTaintPolicy alone declares no category upstream.
        categories = None if kind == "ClusterTaintPolicy" else ["karmada-io"]
        assert spec["names"].get("categories") == categories
        assert spec["names"].get("shortNames") == short_names
        assert [v["name"] for v in spec["versions"] if v["served"]] == served
        assert [v["name"] for v in spec["versions"] if v["storage"]] == [storage]
        for version in spec["versions"]:
            assert version.get("subresources") == subresources
            assert "description" not in str(version["schema"]), name


def test_every_file_names_the_upstream_file_and_commit_it_came_from() -> None:
    for name in crds.PUBLISHED:
        text = resources.files("emulator.karmada").joinpath(name).read_text()
        found = _PROVENANCE.match(text)
        assert found is not None, name
        assert found["file"] == name


def test_printer_columns_are_those_the_crds_declare() -> None:
    columns = {
        crd["metadata"]["name"]: {
            v["name"]: [c["name"] for c in v.get("additionalPrinterColumns") or []]
            for v in crd["spec"]["versions"]
        }
        for crd in crds.published_crds()
    }
    policy = ["CONFLICT-RESOLUTION", "PRIORITY", "AGE"]
    assert columns["propagationpolicies.policy.karmada.io"] == {"v1alpha1": policy}
    assert columns["clusterpropagationpolicies.policy.karmada.io"] == {"v1alpha1": policy}
    binding = {"v1alpha1": [], "v1alpha2": ["SCHEDULED", "FULLYAPPLIED", "AGE"]}
    assert columns["resourcebindings.work.karmada.io"] == binding
    assert columns["clusterresourcebindings.work.karmada.io"] == binding
    assert columns["resourceinterpretercustomizations.config.karmada.io"] == {
        "v1alpha1": ["TARGET-API-VERSION", "TARGET-KIND", "AGE"]
    }
    assert columns["overridepolicies.policy.karmada.io"] == {"v1alpha1": []}


def test_shared_subschemas_are_separate_objects() -> None:
    """YAML anchors write a subschema once; every use must still be its own copy."""
    (binding,) = (
        c for c in crds.published_crds() if c["spec"]["names"]["kind"] == "ResourceBinding"
    )
    v1alpha1, v1alpha2 = (v["schema"]["openAPIV3Schema"] for v in binding["spec"]["versions"])
    clusters = v1alpha2["properties"]["spec"]["properties"]["clusters"]
    required_by = v1alpha2["properties"]["spec"]["properties"]["requiredBy"]
    clusters["items"]["properties"]["name"]["maxLength"] = 1
    assert (
        "maxLength"
        not in required_by["items"]["properties"]["clusters"]["items"]["properties"]["name"]
    )
    assert (
        "maxLength"
        not in v1alpha1["properties"]["spec"]["properties"]["clusters"]["items"]["properties"][
            "name"
        ]
    )
    fresh = crds.load("work.karmada.io_resourcebindings.yaml")["spec"]["versions"][1]
    fresh_clusters = fresh["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "maxLength" not in fresh_clusters["clusters"]["items"]["properties"]["name"]


def test_each_version_yields_a_structural_schema_with_defaults() -> None:
    (policy,) = (
        c for c in crds.published_crds() if c["spec"]["names"]["kind"] == "PropagationPolicy"
    )
    schema = crd_schema(policy, "v1alpha1")
    obj = {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
            "placement": {"replicaScheduling": {}},
        },
    }
    schema.default(obj)
    assert obj["spec"] == {
        "conflictResolution": "Abort",
        "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}},
        "preemption": "Never",
        "priority": 0,
        "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
        "schedulerName": "default-scheduler",
    }
    assert schema.validate(obj) == []


def test_the_option_belongs_to_the_karmada_profile(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="karmada profile"):
        profile_by_name("member", "member1", all_crds=True)
    args = ["--kubeconfig-out", "k", "--all-crds"]
    assert parse_args(["--profile", "karmada", *args]).all_crds is True
    assert parse_args(["--profile", "karmada", "--kubeconfig-out", "k"]).all_crds is False
    with pytest.raises(SystemExit):
        parse_args(["--profile", "member", *args])
    assert "--all-crds needs --profile karmada" in capsys.readouterr().err


async def test_default_profile_keeps_the_agents_kinds_and_the_option_adds_the_rest() -> None:
    async with run_emulator("karmada") as emu, emu.client() as client:
        groups = {g["name"] for g in (await client.get("/apis")).json()["groups"]}
        assert {"work.karmada.io", "config.karmada.io", "networking.karmada.io"} <= groups
        assert "policy.karmada.io" not in groups
        works = (await client.get("/apis/work.karmada.io/v1alpha1")).json()["resources"]
        assert [r["name"] for r in works if "/" not in r["name"]] == ["works"]
    async with run_emulator("karmada", all_crds=True) as emu, emu.client() as client:
        listed = await client.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        names = {item["metadata"]["name"] for item in listed.json()["items"]}
        assert set(EXPECTED) <= names
        binding = (await client.get("/apis/work.karmada.io")).json()
        assert binding["preferredVersion"]["version"] == "v1alpha2"
        assert [v["version"] for v in binding["versions"]] == ["v1alpha2", "v1alpha1"]
