"""What the control plane must grant for bootstrap-token registration, and checks for it.

Prerequisites (what `karmadactl init` installs; karmada-contract 4.1): `kube-public/cluster-info`
readable by `system:anonymous`; the bootstrap group may create CSRs and is allowed the
`clusteragent` approval; the agents group is allowed the `selfclusteragent` approval (rotation).
Upstream also installs an all-powerful `system:karmada:agent:rbac-generator` identity that any
bootstrap-token holder can obtain; we check for it but never create it: the least-privilege
alternative is the per-cluster RBAC from deploy/ pre-created by the admin
(`token create --for-cluster NAME`).

Checks use SubjectAccessReview (as the admin) or SelfSubjectAccessReview (as the identity
itself), so they answer for whatever authorizer the control plane runs, not for our reading of
its RBAC objects.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent.karmada.names import (
    AGENT_GROUP,
    CLUSTER_LEASE_NAMESPACE,
    agent_user,
    execution_namespace,
)
from agent.kube.client import GVR, KubeClient
from agent.kube.resources import (
    CERTIFICATE_SIGNING_REQUESTS,
    CLUSTER_ROLES,
    CONFIGMAPS,
    LEASES,
    SECRETS,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SUBJECT_ACCESS_REVIEWS,
)
from agent.resources import CLUSTERS, RESOURCE_INTERPRETER_CUSTOMIZATIONS, WORKS

from . import render
from .tokens import DEFAULT_GROUP

RBAC_GENERATOR_USER = "system:karmada:agent:rbac-generator"
CLUSTER_INFO_NAMESPACE = "kube-public"
CLUSTER_INFO_NAME = "cluster-info"
ANONYMOUS = "system:anonymous"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Access:
    verb: str
    resource: GVR
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def attributes(self) -> Obj:
        attrs: Obj = {
            "verb": self.verb,
            "group": self.resource.group,
            "resource": self.resource.resource,
        }
        for key in ("subresource", "namespace", "name"):
            if getattr(self, key):
                attrs[key] = getattr(self, key)
        return attrs

    def __str__(self) -> str:
        what = self.resource.resource + (f"/{self.subresource}" if self.subresource else "")
        if self.resource.group:
            what += f".{self.resource.group}"
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {what}{named}{where}"


async def allowed(client: KubeClient, user: str, groups: list[str], access: Access) -> bool:
    """SubjectAccessReview (needs create on subjectaccessreviews, i.e. an admin)."""
    review = await client.create(
        SUBJECT_ACCESS_REVIEWS,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": access.attributes()},
        },
    )
    return bool((review.get("status") or {}).get("allowed"))


async def self_allowed(client: KubeClient, access: Access) -> bool:
    review = await client.create(
        SELF_SUBJECT_ACCESS_REVIEWS,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": access.attributes()},
        },
    )
    return bool((review.get("status") or {}).get("allowed"))


def agent_access(cluster: str, cluster_namespace: str) -> list[Access]:
    """A sample of what the agent identity needs; all present = the per-cluster RBAC exists."""
    return [
        Access("update", CLUSTERS, "status", name=cluster),
        Access("list", WORKS, namespace=execution_namespace(cluster)),
        Access("update", LEASES, namespace=CLUSTER_LEASE_NAMESPACE, name=cluster),
        Access("get", SECRETS, namespace=cluster_namespace, name=cluster),
        Access("watch", RESOURCE_INTERPRETER_CUSTOMIZATIONS),
    ]


async def missing_agent_access(
    client: KubeClient, cluster: str, cluster_namespace: str
) -> list[Access]:
    """As the agent itself: what of its RBAC is missing."""
    return [
        a for a in agent_access(cluster, cluster_namespace) if not await self_allowed(client, a)
    ]


# --- prerequisites ------------------------------------------------------------------------------


def cluster_info_kubeconfig(server: str, ca_pem: bytes) -> str:
    """The kubeconfig kept in cluster-info: one unnamed cluster, server and CA only."""
    config: Obj = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "",
                "cluster": {
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                    "server": server,
                },
            }
        ],
        "contexts": None,
        "current-context": "",
        "preferences": {},
        "users": None,
    }
    return yaml.safe_dump(config, sort_keys=True)


def cluster_info_configmap(server: str, ca_pem: bytes) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CLUSTER_INFO_NAME, "namespace": CLUSTER_INFO_NAMESPACE},
        "data": {"kubeconfig": cluster_info_kubeconfig(server, ca_pem)},
    }


def prerequisite_rbac(bootstrap_groups: list[str]) -> list[Obj]:
    """The RBAC of karmada-contract 4.1 without the rbac-generator, as written in
    deploy/control-plane/prerequisites, with `bootstrap_groups` in place of the default
    bootstrap group."""
    groups = [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}
        for g in bootstrap_groups
    ]
    objects = []
    for obj in _resources(render.deploy_dir() / "control-plane" / "prerequisites"):
        if [s.get("name") for s in obj.get("subjects") or []] == [DEFAULT_GROUP]:
            obj["subjects"] = list(groups)
        objects.append(obj)
    return objects


def _resources(kustomization: Path) -> list[Obj]:
    """The objects of a kustomization that only lists plain resource files."""
    listed = yaml.safe_load((kustomization / "kustomization.yaml").read_text())["resources"]
    return [
        doc
        for name in listed
        for doc in yaml.safe_load_all((kustomization / name).read_text())
        if doc
    ]


@dataclass(frozen=True)
class Requirement:
    """One thing registration needs from the control plane: who must be allowed what."""

    description: str
    user: str
    groups: tuple[str, ...]
    access: Access
    fix: str


def bootstrap_requirements(token_id: str, bootstrap_groups: list[str]) -> list[Requirement]:
    user = f"system:bootstrap:{token_id}"
    groups = ("system:bootstrappers", *bootstrap_groups, "system:authenticated")
    csr = CERTIFICATE_SIGNING_REQUESTS
    return [
        Requirement(
            "anonymous users can read kube-public/cluster-info (discovery)",
            ANONYMOUS,
            ("system:unauthenticated",),
            Access("get", CONFIGMAPS, namespace=CLUSTER_INFO_NAMESPACE, name=CLUSTER_INFO_NAME),
            "Role/RoleBinding system:karmada:bootstrap-signer-clusterinfo in kube-public",
        ),
        Requirement(
            "the bootstrap token may create certificate signing requests",
            user,
            groups,
            Access("create", csr),
            "ClusterRoleBinding system:karmada:agent-bootstrap -> system:node-bootstrapper",
        ),
        Requirement(
            "Karmada's CSR approver may auto-approve the bootstrap token's agent CSRs",
            user,
            groups,
            Access("create", csr, "clusteragent"),
            "ClusterRole/Binding system:karmada:certificatesigningrequest:autoapprover",
        ),
        Requirement(
            "agents may renew their own certificates (selfclusteragent approval)",
            "system:karmada:agent:example",
            (AGENT_GROUP, "system:authenticated"),
            Access("create", csr, "selfclusteragent"),
            "ClusterRole/Binding system:karmada:certificatesigningrequest:selfautoapprover",
        ),
    ]


async def unmet(client: KubeClient, requirements: list[Requirement]) -> list[Requirement]:
    return [r for r in requirements if not await allowed(client, r.user, list(r.groups), r.access)]


async def rbac_generator_available(client: KubeClient) -> bool:
    """Whether upstream's rbac-generator identity could create per-cluster RBAC."""
    return await allowed(
        client,
        RBAC_GENERATOR_USER,
        [AGENT_GROUP, "system:authenticated"],
        Access("create", CLUSTER_ROLES),
    )


async def missing_agent_rbac(
    client: KubeClient, cluster: str, cluster_namespace: str
) -> list[Access]:
    """As the admin: which of the agent identity's accesses are missing."""
    user = agent_user(cluster)
    groups = [AGENT_GROUP, "system:authenticated"]
    return [
        a
        for a in agent_access(cluster, cluster_namespace)
        if not await allowed(client, user, groups, a)
    ]
