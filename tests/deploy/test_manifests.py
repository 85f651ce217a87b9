"""deploy/: every kustomization renders with the real kubectl, and what it renders is checked.

The hardening settings, probes, ports, flags and RBAC rules are asserted one by one, so a change
that drops any of them fails here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.options import parse_options
from agent.version import VERSION

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
# kubectl (with its built-in kustomize) is on every developer and CI machine: a missing one is a
# failure, never a skip.
KUBECTL = shutil.which("kubectl") or "kubectl"
LEAVES = ["base", "overlays/ha", "overlays/cert-rotation", "overlays/no-report-secrets"]
AGENT_USER = "system:karmada:agent:member1"

Obj = dict[str, Any]


def render(directory: Path) -> list[Obj]:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def agent_container(deployment: Obj) -> Obj:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "karmada-agent"
    return dict(container)


@pytest.fixture(scope="module", params=LEAVES)
def leaf(request: pytest.FixtureRequest) -> tuple[str, list[Obj]]:
    return request.param, render(DEPLOY / request.param)


def test_member_side_objects_and_names(leaf: tuple[str, list[Obj]]) -> None:
    _, objects = leaf
    assert not [o for o in objects if o["kind"] == "ConfigMap"], "parameters must stay local"
    namespace = find(objects, "Namespace", "karmada-system")
    assert namespace["metadata"]["labels"]["karmada.io/system"] == "true"
    sa = find(objects, "ServiceAccount", "karmada-agent-sa")
    assert sa["metadata"]["namespace"] == "karmada-system"
    assert sa["automountServiceAccountToken"] is False
    binding = find(objects, "ClusterRoleBinding", "karmada-agent")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "karmada-agent",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "karmada-agent-sa", "namespace": "karmada-system"}
    ]
    role = find(objects, "ClusterRole", "karmada-agent")
    assert role["rules"] == [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["get"]},
    ]
    assert not [o for o in objects if o["kind"] == "Secret"], "credentials are never in deploy/"
    records = find(objects, "Role", "karmada-agent-work-records")
    assert records["metadata"]["namespace"] == "karmada-system"
    assert records["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "verbs": ["get", "list", "create", "update", "patch", "delete"],
        }
    ]
    records_binding = find(objects, "RoleBinding", "karmada-agent-work-records")
    assert records_binding["metadata"]["namespace"] == "karmada-system"
    assert records_binding["roleRef"]["name"] == "karmada-agent-work-records"
    assert records_binding["subjects"] == binding["subjects"]


def test_deployment_is_hardened(leaf: tuple[str, list[Obj]]) -> None:
    _, objects = leaf
    deployment = find(objects, "Deployment", "karmada-agent")
    assert deployment["metadata"]["namespace"] == "karmada-system"
    assert deployment["metadata"]["labels"] == {"app": "karmada-agent"}
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "karmada-agent"}}
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["template"]["metadata"]["labels"]["app"] == "karmada-agent"
    assert pod["serviceAccountName"] == "karmada-agent-sa"
    assert pod["automountServiceAccountToken"] is True
    for forbidden in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(forbidden)
    pod_security = pod["securityContext"]
    assert pod_security["runAsNonRoot"] is True
    assert isinstance(pod_security["runAsUser"], int)
    assert pod_security["runAsUser"] == 65532
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}

    container = agent_container(deployment)
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == 65532
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security.get("privileged", False) is False
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}

    resources = container["resources"]
    for kind in ("requests", "limits"):
        assert set(resources[kind]) == {"cpu", "memory"}, kind

    volumes = {v["name"]: v for v in pod["volumes"]}
    assert all("hostPath" not in v for v in volumes.values())
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert set(mounts) == {"/etc/kubeconfig", "/tmp"}
    kubeconfig = mounts["/etc/kubeconfig"]
    assert kubeconfig["readOnly"] is True
    assert volumes[kubeconfig["name"]]["secret"]["secretName"] == "karmada-kubeconfig"
    assert volumes[kubeconfig["name"]]["secret"]["defaultMode"] == 0o440
    tmp = volumes[mounts["/tmp"]["name"]]
    assert tmp["emptyDir"]["medium"] == "Memory"
    assert "sizeLimit" in tmp["emptyDir"]
    writable = [m for m in container["volumeMounts"] if not m.get("readOnly")]
    assert [m["mountPath"] for m in writable] == ["/tmp"]


def test_ports_and_probes(leaf: tuple[str, list[Obj]]) -> None:
    _, objects = leaf
    container = agent_container(find(objects, "Deployment", "karmada-agent"))
    ports = {p["name"]: p for p in container["ports"]}
    assert ports["metrics"]["containerPort"] == 8080
    assert ports["health"]["containerPort"] == 10357
    for probe, path in (
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
        ("startupProbe", "/healthz"),
    ):
        get = container[probe]["httpGet"]
        assert get["path"] == path, probe
        port = get["port"]
        assert ports[port]["containerPort"] == 10357 if isinstance(port, str) else port == 10357
    options = parse_options(container["command"][1:])
    assert options.metrics_bind is not None
    assert options.metrics_bind.port == ports["metrics"]["containerPort"]
    assert options.health_probe_bind is not None
    assert options.health_probe_bind.port == ports["health"]["containerPort"]


def test_command_is_upstreams_and_valid_for_this_agent(leaf: tuple[str, list[Obj]]) -> None:
    name, objects = leaf
    container = agent_container(find(objects, "Deployment", "karmada-agent"))
    assert container["image"] == f"ghcr.io/karmada-pull-agent/karmada-agent:{VERSION}"
    command = container["command"]
    expected = [
        "/bin/karmada-agent",
        "--karmada-kubeconfig=/etc/kubeconfig/karmada-kubeconfig",
        "--cluster-name=member1",
        "--cluster-api-endpoint=",
        "--cluster-provider=",
        "--cluster-region=",
        "--cluster-zones=",
        "--controllers=*",
        "--proxy-server-address=",
        "--leader-elect-resource-namespace=karmada-system",
        "--cluster-namespace=karmada-cluster",
        "--cluster-status-update-frequency=10s",
        "--metrics-bind-address=:8080",
        "--health-probe-bind-address=0.0.0.0:10357",
        "--v=2",
    ]
    if name == "overlays/cert-rotation":
        expected[7] = "--controllers=*,certRotation"
    if name == "overlays/no-report-secrets":
        expected.append("--report-secrets=None")
    assert command == expected
    options = parse_options(command[1:])
    assert options.cluster_name == "member1"
    assert options.karmada_kubeconfig == "/etc/kubeconfig/karmada-kubeconfig"
    assert options.cert_rotation_requested is (name == "overlays/cert-rotation")
    assert options.report_secrets == (
        ("None",)
        if name == "overlays/no-report-secrets"
        else ("KubeCredentials", "KubeImpersonator")
    )


def test_replicas_spread_and_disruption_budget(leaf: tuple[str, list[Obj]]) -> None:
    name, objects = leaf
    deployment = find(objects, "Deployment", "karmada-agent")
    pod = deployment["spec"]["template"]["spec"]
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    if name != "overlays/ha":
        assert deployment["spec"]["replicas"] == 1
        assert not budgets
        return
    assert deployment["spec"]["replicas"] == 2
    keys = set()
    for constraint in pod["topologySpreadConstraints"]:
        assert constraint["labelSelector"] == {"matchLabels": {"app": "karmada-agent"}}
        keys.add(constraint["topologyKey"])
    assert "kubernetes.io/hostname" in keys
    [budget] = budgets
    assert budget["metadata"]["namespace"] == "karmada-system"
    assert budget["spec"]["selector"] == {"matchLabels": {"app": "karmada-agent"}}
    assert budget["spec"]["minAvailable"] == 1


# --- the control-plane component ------------------------------------------------------------

Rule = tuple[str, str, str, str, str, str]  # namespace, apiGroup, resource, resourceName, verb


def expected_control_plane_rules(cluster: str, secret_ns: str) -> set[tuple[str, ...]]:
    """The least-privilege set, spelled out: (namespace or '', group, resource, name or '*', verb)."""
    rules: set[tuple[str, ...]] = set()

    def add(ns: str, group: str, resource: str, names: list[str], verbs: list[str]) -> None:
        for name in names:
            for verb in verbs:
                rules.add((ns, group, resource, name, verb))

    k = "cluster.karmada.io"
    add("", k, "clusters", [cluster], ["get", "watch", "update", "delete"])
    add("", k, "clusters", ["*"], ["create", "list"])
    add("", k, "clusters/status", [cluster], ["get", "update", "patch"])
    add("", k, "clusters/proxy", [cluster], ["get"])  # the tunnel's route check
    add("", "", "namespaces", [secret_ns], ["get"])
    add("", "certificates.k8s.io", "certificatesigningrequests", ["*"], ["create", "get", "watch"])
    add("", "certificates.k8s.io", "certificatesigningrequests/selfclusteragent", ["*"], ["create"])
    for config in ("resourceinterpretercustomizations", "resourceinterpreterwebhookconfigurations"):
        add("", "config.karmada.io", config, ["*"], ["get", "list", "watch"])
    es = f"karmada-es-{cluster}"
    add(es, "work.karmada.io", "works", ["*"],
        ["get", "list", "watch", "create", "update", "patch", "delete"])  # fmt: skip
    add(es, "work.karmada.io", "works/status", ["*"], ["get", "update", "patch"])
    # Everywhere: Events about resource templates go to the templates' own namespaces.
    for group in ("", "events.k8s.io"):
        add("", group, "events", ["*"], ["create", "patch"])
    add(secret_ns, "", "secrets", ["*"], ["create"])
    add(secret_ns, "", "secrets", [cluster, f"{cluster}-impersonator"], ["get", "update", "patch"])
    coordination = "coordination.k8s.io"
    add("karmada-cluster", coordination, "leases", ["*"], ["create"])
    add("karmada-cluster", coordination, "leases", [cluster], ["get", "update"])
    add("karmada-system", coordination, "leases", ["*"], ["create"])
    add("karmada-system", coordination, "leases", [f"karmada-agent-{cluster}"], ["get", "update"])
    return rules


def granted_rules(objects: list[Obj], user: str) -> set[tuple[str, ...]]:
    roles = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    granted: set[tuple[str, ...]] = set()
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
        ]
        namespace = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role_ns = namespace if ref["kind"] == "Role" else ""
        role = roles[(ref["kind"], role_ns, ref["name"])]
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for name in rule.get("resourceNames", ["*"]):
                        for verb in rule["verbs"]:
                            granted.add((namespace, group, resource, name, verb))
    return granted


def test_control_plane_rbac_is_exactly_the_least_privilege_set() -> None:
    objects = render(DEPLOY / "control-plane")
    assert not [o for o in objects if o["kind"] == "ConfigMap"]
    assert granted_rules(objects, AGENT_USER) == expected_control_plane_rules(
        "member1", "karmada-cluster"
    )
    for obj in objects:
        assert obj["metadata"]["labels"]["karmada.io/system"] == "true"
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    assert names == {"karmada-es-member1", "karmada-cluster"}
    assert find(objects, "ClusterRole", "system:karmada:member1:agent")
    assert (
        find(objects, "Role", "system:karmada:member1:agent-work")["metadata"]["namespace"]
        == "karmada-es-member1"
    )
    for obj in objects:
        for rule in obj.get("rules", []):
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (obj["metadata"]["name"], rule)


def with_params(tmp_path: Path, **params: str) -> Path:
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy)
    env = copy / "params" / "params.env"
    values = dict(line.split("=", 1) for line in env.read_text().splitlines() if "=" in line)
    values.update(params)
    env.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return copy


def test_parameters_reach_every_field(tmp_path: Path) -> None:
    deploy = with_params(
        tmp_path,
        clusterName="edge-7",
        clusterNamespace="agent-secrets",
        clusterAPIEndpoint="https://10.0.0.7:6443",
        clusterProvider="aws",
        clusterRegion="eu-west-1",
        clusterZones="eu-west-1a,eu-west-1b",
        proxyServerAddress="socks5://proxy:1080",
    )
    objects = render(deploy / "overlays" / "ha")
    command = agent_container(find(objects, "Deployment", "karmada-agent"))["command"]
    options = parse_options(command[1:])
    assert options.cluster_name == "edge-7"
    assert options.cluster_namespace == "agent-secrets"
    assert options.cluster_api_endpoint == "https://10.0.0.7:6443"
    assert options.cluster_provider == "aws"
    assert options.cluster_region == "eu-west-1"
    assert options.cluster_zones == ("eu-west-1a", "eu-west-1b")
    assert options.proxy_server_address == "socks5://proxy:1080"

    control_plane = render(deploy / "control-plane")
    assert granted_rules(control_plane, "system:karmada:agent:edge-7") == (
        expected_control_plane_rules("edge-7", "agent-secrets")
    )
    text = yaml.safe_dump_all(control_plane)
    assert "member1" not in text


def test_control_plane_parameters_can_be_overridden_on_top(tmp_path: Path) -> None:
    """What an admin (or karmada-bootstrap register) does without editing deploy/."""
    deploy = with_params(tmp_path)
    mine = deploy / "mine-cp"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../control-plane"],
                "configMapGenerator": [
                    {
                        "name": "karmada-agent-parameters",
                        "behavior": "merge",
                        "literals": ["clusterName=member-two", "clusterNamespace=other-ns"],
                    }
                ],
                "components": ["../components/control-plane-parameters"],
            }
        )
    )
    objects = render(mine)
    assert granted_rules(objects, "system:karmada:agent:member-two") == (
        expected_control_plane_rules("member-two", "other-ns")
    )
    assert not [o for o in objects if o["kind"] == "ConfigMap"]


def test_member_parameters_can_be_overridden_on_top(tmp_path: Path) -> None:
    deploy = with_params(tmp_path)
    mine = deploy / "mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../overlays/cert-rotation"],
                "configMapGenerator": [
                    {
                        "name": "karmada-agent-parameters",
                        "behavior": "merge",
                        "literals": ["clusterName=member-two", "clusterRegion=r1"],
                    }
                ],
                "components": ["../components/member-parameters"],
            }
        )
    )
    objects = render(mine)
    command = agent_container(find(objects, "Deployment", "karmada-agent"))["command"]
    options = parse_options(command[1:])
    assert options.cluster_name == "member-two"
    assert options.cluster_region == "r1"
    assert options.cert_rotation_requested is True
    assert not [o for o in objects if o["kind"] == "ConfigMap"]


COMMENTED_FILES = [
    DEPLOY / "base" / "clusterrole.yaml",
    DEPLOY / "base" / "work-records-role.yaml",
    *sorted((DEPLOY / "components" / "control-plane-rbac").glob("*.yaml")),
]


@pytest.mark.parametrize("path", COMMENTED_FILES, ids=lambda p: p.name)
def test_every_rbac_rule_has_a_comment(path: Path) -> None:
    lines = path.read_text().splitlines()
    for index, line in enumerate(lines):
        if re.match(r"\s*- (apiGroups|nonResourceURLs):", line):
            before = lines[index - 1].strip()
            # A comment right above, or a continuation of the previous rule's comment block.
            assert before.startswith("#") or (
                before.startswith("rules:") and (lines[index - 2].strip().startswith("#"))
            ), f"{path.name}:{index + 1}: rule without a comment"
