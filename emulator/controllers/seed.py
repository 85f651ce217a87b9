"""Objects a fresh control plane or member cluster starts with.

kube-apiserver creates the system namespaces and its default RBAC; karmada's installers
add the bootstrap prerequisites (cluster-info, RBAC for bootstrap and agent identities),
karmada's namespaces and CRDs; a member cluster has Nodes.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import yaml

from emulator.controllers import ControllerContext, authentication_trust, tolerate
from emulator.karmada import crds
from emulator.loopback import JSON, Loopback
from emulator.policy import default_rbac_objects
from emulator.timefmt import rfc3339

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
KARMADA_NAMESPACES = ("karmada-system", "karmada-cluster")

_PLURALS = {
    "Namespace": "namespaces",
    "ConfigMap": "configmaps",
    "ServiceAccount": "serviceaccounts",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "CustomResourceDefinition": "customresourcedefinitions",
    "Node": "nodes",
}


def collection_path(obj: JSON) -> str:
    """The REST collection an object is created in."""
    api_version = obj["apiVersion"]
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    namespace = obj.get("metadata", {}).get("namespace")
    plural = _PLURALS[obj["kind"]]
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"


async def ensure_created(api: Loopback, path: str, body: JSON) -> JSON | None:
    """POST `body` to the collection at `path`; an existing object is left as it is."""
    return await tolerate(api.create(path, body), 409)


async def create_all(ctx: ControllerContext, objects: list[JSON]) -> None:
    for obj in objects:
        await ensure_created(ctx.api, collection_path(obj), obj)


def stable_uid(emulator_name: str, what: str) -> str:
    """A uid that is the same every time an emulator of this name starts."""
    return str(
        uuid.uuid5(uuid.NAMESPACE_URL, f"karmada-pull-agent.emulator/{emulator_name}/{what}")
    )


def namespace(name: str, labels: dict[str, str] | None = None) -> JSON:
    meta: JSON = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def default_rbac() -> list[JSON]:
    """kube-apiserver's default RBAC (AUTH's policy module)."""
    return list(default_rbac_objects())


async def seed_common(ctx: ControllerContext) -> None:
    await create_all(ctx, [namespace(n) for n in SYSTEM_NAMESPACES])
    await create_all(ctx, default_rbac())
    # Published before the server reports ready; the trust controller keeps it so.
    await authentication_trust.sync(ctx)


# --- karmada control plane -------------------------------------------------------------


def cluster_info_kubeconfig(server: str, ca_pem: bytes) -> str:
    """The kubeconfig kept in kube-public/cluster-info: one unnamed cluster, as
    kubeadm and karmadactl init write it (client-go's clientcmd YAML serialisation)."""
    ca_data = base64.b64encode(ca_pem).decode()
    return (
        "apiVersion: v1\n"
        "clusters:\n"
        "- cluster:\n"
        f"    certificate-authority-data: {ca_data}\n"
        f"    server: {server}\n"
        '  name: ""\n'
        "contexts: null\n"
        'current-context: ""\n'
        "kind: Config\n"
        "preferences: {}\n"
        "users: null\n"
    )


# The repository's deploy/: the emulator runs from a checkout.
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# Upstream's identity for generating per-cluster RBAC, which karmadactl init installs and
# karmada-bootstrap never creates (anyone holding a bootstrap token can obtain it).
RBAC_GENERATOR = "system:karmada:agent-rbac-generator"
_RBAC_LABELS = {"karmada.io/bootstrapping": "rbac-defaults"}


def _plain_resources(kustomization: Path) -> list[JSON]:
    """The objects of a kustomization that only lists resource files (bootstrap reads them
    the same way; the emulator may not import it)."""
    listed = yaml.safe_load((kustomization / "kustomization.yaml").read_text())["resources"]
    texts = [(kustomization / name).read_text() for name in listed]
    return [doc for text in texts for doc in yaml.safe_load_all(text) if doc]


def karmada_bootstrap_objects(server: str, ca_pem: bytes) -> list[JSON]:
    """What karmadactl init installs for bootstrap-token registration: cluster-info, the RBAC
    written in deploy/control-plane/prerequisites, and upstream's rbac-generator."""
    rbac = "rbac.authorization.k8s.io"
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": cluster_info_kubeconfig(server, ca_pem)},
        },
        *_plain_resources(DEPLOY / "control-plane" / "prerequisites"),
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": RBAC_GENERATOR, "labels": _RBAC_LABELS},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": RBAC_GENERATOR, "labels": _RBAC_LABELS},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": RBAC_GENERATOR},
            "subjects": [
                {"apiGroup": rbac, "kind": "User", "name": "system:karmada:agent:rbac-generator"}
            ],
        },
    ]


async def seed_karmada(ctx: ControllerContext, *, all_crds: bool = False) -> None:
    """`all_crds`: Karmada's published CRDs, as a full control plane has them, instead of the
    kinds the agent uses."""
    await seed_common(ctx)
    await create_all(ctx, [namespace(n) for n in KARMADA_NAMESPACES])
    await create_all(ctx, crds.control_plane_crds() if all_crds else crds.default_crds())
    await create_all(ctx, karmada_bootstrap_objects(ctx.server_url, ctx.ca.cert_pem))


# --- member cluster ----------------------------------------------------------------------

NODE_COUNT = 3
KUBELET_VERSION = "v1.33.1"


def member_nodes(emulator_name: str, count: int = NODE_COUNT, now: str = "") -> list[JSON]:
    nodes: list[JSON] = []
    for index in range(count):
        name = f"{emulator_name}-node-{index}"
        capacity = {
            "cpu": "8",
            "memory": "32827396Ki",
            "pods": "110",
            "ephemeral-storage": "102626232Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
        }
        allocatable = dict(
            capacity, cpu="7800m", memory="32212996Ki", **{"ephemeral-storage": "94580335255"}
        )
        condition_time = now or "2025-01-01T00:00:00Z"
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "beta.kubernetes.io/os": "linux",
                        "beta.kubernetes.io/arch": "amd64",
                        "topology.kubernetes.io/zone": f"zone-{index % 2}",
                        **({"node-role.kubernetes.io/control-plane": ""} if index == 0 else {}),
                    },
                },
                "spec": {"podCIDR": f"10.244.{index}.0/24", "podCIDRs": [f"10.244.{index}.0/24"]},
                "status": {
                    "capacity": capacity,
                    "allocatable": allocatable,
                    "conditions": [
                        {
                            "type": cond,
                            "status": "False",
                            "reason": reason,
                            "message": message,
                            "lastHeartbeatTime": condition_time,
                            "lastTransitionTime": condition_time,
                        }
                        for cond, reason, message in (
                            (
                                "MemoryPressure",
                                "KubeletHasSufficientMemory",
                                "kubelet has sufficient memory available",
                            ),
                            (
                                "DiskPressure",
                                "KubeletHasNoDiskPressure",
                                "kubelet has no disk pressure",
                            ),
                            (
                                "PIDPressure",
                                "KubeletHasSufficientPID",
                                "kubelet has sufficient PID available",
                            ),
                        )
                    ]
                    + [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": condition_time,
                            "lastTransitionTime": condition_time,
                        }
                    ],
                    "addresses": [
                        {"type": "InternalIP", "address": f"172.18.0.{index + 2}"},
                        {"type": "Hostname", "address": name},
                    ],
                    "nodeInfo": {
                        "architecture": "amd64",
                        "bootID": stable_uid(emulator_name, f"boot/{name}"),
                        "containerRuntimeVersion": "containerd://2.1.1",
                        "kernelVersion": "6.8.0-60-generic",
                        "kubeProxyVersion": KUBELET_VERSION,
                        "kubeletVersion": KUBELET_VERSION,
                        "machineID": stable_uid(emulator_name, f"machine/{name}").replace("-", ""),
                        "operatingSystem": "linux",
                        "osImage": "Debian GNU/Linux 12 (bookworm)",
                        "systemUUID": stable_uid(emulator_name, f"system/{name}"),
                    },
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                },
            }
        )
    return nodes


async def seed_member(ctx: ControllerContext) -> None:
    await seed_common(ctx)
    for node in member_nodes(ctx.cluster_name, now=rfc3339(ctx.clock())):
        created = await ensure_created(
            ctx.api, "/api/v1/nodes", {k: v for k, v in node.items() if k != "status"}
        )
        if created is not None:
            # Node status is written through /status, as the kubelet does.
            created["status"] = node["status"]
            await ctx.api.update(f"/api/v1/nodes/{node['metadata']['name']}/status", created)
    # The MCS API, as a member running Karmada's serviceExport machinery has it installed.
    await create_all(ctx, crds.mcs_crds())
