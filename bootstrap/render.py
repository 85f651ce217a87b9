"""Render the agent's manifests from deploy/ with `kubectl kustomize`, never from strings here.

A throw-away kustomization on top of deploy/ merges our values into the ConfigMap
`karmada-agent-parameters` and includes the parameters component again (the mechanism
deploy/README.md documents for admins), plus kustomize's own `namespace`, `replicas` and
`images` fields for `-n`, `--karmada-agent-replicas` and `--karmada-agent-image`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent.karmada import names

DEPLOY_ENV = "KARMADA_BOOTSTRAP_DEPLOY_DIR"
KUBECTL_ENV = "KARMADA_BOOTSTRAP_KUBECTL"
# deploy/'s agent on the member: the Deployment, its ClusterRole and ClusterRoleBinding are all
# named AGENT_NAME, its ServiceAccount AGENT_SERVICE_ACCOUNT.
AGENT_NAME = "karmada-agent"
AGENT_SERVICE_ACCOUNT = "karmada-agent-sa"
IMAGE_NAME = "ghcr.io/karmada-pull-agent/karmada-agent"
# Position of --leader-elect-resource-namespace in deploy/base/deployment.yaml's command.
_LEADER_ELECT_INDEX = 9

Obj = dict[str, Any]


class RenderError(Exception):
    pass


def deploy_dir() -> Path:
    """deploy/: $KARMADA_BOOTSTRAP_DEPLOY_DIR, else shipped inside the package
    (bootstrap/deploy in a wheel), else next to the package (a source checkout)."""
    candidates = []
    if os.environ.get(DEPLOY_ENV):
        candidates.append(Path(os.environ[DEPLOY_ENV]))
    here = Path(__file__).resolve().parent
    candidates += [here / "deploy", here.parent / "deploy"]
    for candidate in candidates:
        if (candidate / "base" / "kustomization.yaml").is_file():
            return candidate
    raise RenderError(
        "cannot find the deploy/ manifests (looked in "
        + ", ".join(str(c) for c in candidates)
        + f"); set {DEPLOY_ENV}"
    )


def kubectl() -> str:
    found = os.environ.get(KUBECTL_ENV) or shutil.which("kubectl")
    if not found:
        raise RenderError(f"kubectl (with its built-in kustomize) is needed; set {KUBECTL_ENV}")
    return found


@dataclass(frozen=True)
class MemberParams:
    cluster_name: str
    cluster_namespace: str = names.DEFAULT_CLUSTER_NAMESPACE
    cluster_api_endpoint: str = ""
    cluster_provider: str = ""
    cluster_region: str = ""
    cluster_zones: tuple[str, ...] = ()
    proxy_server_address: str = ""
    namespace: str = names.DEFAULT_AGENT_NAMESPACE
    image: str = ""
    replicas: int = 1
    cert_rotation: bool = False
    # The tunnel (deploy/components/tunnel): on when an address is given.
    tunnel_server_address: str = ""
    tunnel_proxy_url: str = ""

    def literals(self) -> list[str]:
        tunnel = [f"tunnelServerAddress={self.tunnel_server_address}"]
        if self.tunnel_proxy_url:
            tunnel.append(f"tunnelProxyURL={self.tunnel_proxy_url}")
        return [
            *tunnel,
            f"clusterName={self.cluster_name}",
            f"clusterNamespace={self.cluster_namespace}",
            f"clusterAPIEndpoint={self.cluster_api_endpoint}",
            f"clusterProvider={self.cluster_provider}",
            f"clusterRegion={self.cluster_region}",
            f"clusterZones={','.join(self.cluster_zones)}",
            f"proxyServerAddress={self.proxy_server_address}",
        ]


def _split_image(image: str) -> Obj:
    """kustomize `images` entry for a full reference (registry/name[:tag][@digest])."""
    entry: Obj = {"name": IMAGE_NAME}
    name = image
    if "@" in name:
        name, digest = name.split("@", 1)
        entry["digest"] = digest
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
        entry["newTag"] = tag
    entry["newName"] = name
    return entry


def _leader_namespace_patch(namespace: str) -> Obj:
    index = _LEADER_ELECT_INDEX
    ops = [
        {
            "op": "test",
            "path": f"/spec/template/spec/containers/0/command/{index}",
            "value": f"--leader-elect-resource-namespace={names.DEFAULT_AGENT_NAMESPACE}",
        },
        {
            "op": "replace",
            "path": f"/spec/template/spec/containers/0/command/{index}",
            "value": f"--leader-elect-resource-namespace={namespace}",
        },
    ]
    return {
        "target": {"group": "apps", "version": "v1", "kind": "Deployment", "name": AGENT_NAME},
        "patch": yaml.safe_dump(ops),
    }


def member_kustomization(params: MemberParams, deploy: Path, workdir: Path) -> Obj:
    rel = os.path.relpath(deploy, workdir)
    leaf = "overlays/cert-rotation" if params.cert_rotation else "base"
    kustomization: Obj = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"{rel}/{leaf}"],
        "configMapGenerator": [
            {"name": "karmada-agent-parameters", "behavior": "merge", "literals": params.literals()}
        ],
        "components": [f"{rel}/components/member-parameters"],
        "replicas": [{"name": AGENT_NAME, "count": params.replicas}],
    }
    if params.tunnel_server_address:
        kustomization["components"].append(f"{rel}/components/tunnel")
    if params.image:
        kustomization["images"] = [_split_image(params.image)]
    if params.namespace != names.DEFAULT_AGENT_NAMESPACE:
        kustomization["namespace"] = params.namespace
        kustomization["patches"] = [_leader_namespace_patch(params.namespace)]
    return kustomization


def control_plane_kustomization(
    cluster_name: str, cluster_namespace: str, agent_namespace: str, deploy: Path, workdir: Path
) -> Obj:
    rel = os.path.relpath(deploy, workdir)
    kustomization: Obj = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"{rel}/control-plane"],
        "configMapGenerator": [
            {
                "name": "karmada-agent-parameters",
                "behavior": "merge",
                "literals": [
                    f"clusterName={cluster_name}",
                    f"clusterNamespace={cluster_namespace}",
                ],
            }
        ],
        "components": [f"{rel}/components/control-plane-parameters"],
    }
    if agent_namespace != names.DEFAULT_AGENT_NAMESPACE:
        # The leader-election Lease lives in the agent's --leader-elect-resource-namespace.
        kustomization["patches"] = [
            {
                "target": {"labelSelector": f"app.kubernetes.io/component={component}"},
                "patch": yaml.safe_dump(
                    [{"op": "replace", "path": "/metadata/namespace", "value": agent_namespace}]
                ),
            }
            for component in ("agent-rbac-leader-election",)
        ]
    return kustomization


async def _render(build: Any) -> list[Obj]:
    deploy = deploy_dir()
    with tempfile.TemporaryDirectory(prefix="karmada-bootstrap-render-") as tmp:
        workdir = Path(tmp)
        (workdir / "kustomization.yaml").write_text(yaml.safe_dump(build(deploy, workdir)))
        process = await asyncio.create_subprocess_exec(
            kubectl(),
            "kustomize",
            str(workdir),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
    if process.returncode != 0:
        raise RenderError(
            f"kubectl kustomize failed on {deploy}: {err.decode(errors='replace').strip()}"
        )
    return [doc for doc in yaml.safe_load_all(out.decode()) if doc]


async def render_member(params: MemberParams) -> list[Obj]:
    """Namespace, ServiceAccount, ClusterRole/Binding and Deployment for the member."""
    return await _render(lambda deploy, workdir: member_kustomization(params, deploy, workdir))


async def render_control_plane(
    cluster_name: str,
    cluster_namespace: str = names.DEFAULT_CLUSTER_NAMESPACE,
    agent_namespace: str = names.DEFAULT_AGENT_NAMESPACE,
) -> list[Obj]:
    """Namespaces and least-privilege RBAC for `system:karmada:agent:<cluster>`."""
    return await _render(
        lambda deploy, workdir: control_plane_kustomization(
            cluster_name, cluster_namespace, agent_namespace, deploy, workdir
        )
    )
