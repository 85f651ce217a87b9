"""What the control plane's cluster proxy needs to reach a member for a user: RBAC on both sides
(`grant`), and what upstream's unified-auth controller (karmada-controller-manager) ships to a
member so that karmada-aggregated-apiserver's impersonator may act for the users the control
plane lets reach that cluster (`impersonation_works`, `ship_impersonation`).

Read from Karmada's pkg/controllers/unifiedauth and pkg/util (GenerateImpersonationRules): the
subjects of every ClusterRoleBinding whose ClusterRole grants `clusters/proxy` of
cluster.karmada.io for the cluster (or `proxying/proxy` of search.karmada.io) become rules to
impersonate those users, service accounts and groups (by name); a ClusterRole and a
ClusterRoleBinding named `karmada-impersonator` (label karmada.io/system=true) carry them, the
binding's subject being the ServiceAccount karmada-impersonator in the namespace of the
Cluster's impersonatorSecretRef. Each goes to the member as a Work in karmada-es-<cluster>,
named as names.GenerateWorkName names it, with the execution finalizer and the Cluster as its
controller owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from agent.karmada.names import generate_work_name
from agent.tunnel.tunnel import Tunnel
from emulator.emulator import Emulator
from tests import polling
from tests.agent.tunnel.harness import Hub
from tests.e2e.support import running_agent

JSON = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
IMPERSONATOR = "karmada-impersonator"
RBAC_API = f"/apis/{RBAC}/v1"
CLUSTER_API = "/apis/cluster.karmada.io/v1alpha1/clusters"
PROXY_RULE: JSON = {
    "apiGroups": ["cluster.karmada.io"],
    "resources": ["clusters/proxy"],
    "verbs": ["*"],
}


async def grant(client: httpx.AsyncClient, name: str, rules: list[JSON], users: list[str]) -> None:
    """A ClusterRole `name` with `rules`, bound to `users` (on the server `client` talks to)."""
    role = {"metadata": {"name": name}, "rules": rules}
    (await client.post(f"{RBAC_API}/clusterroles", json=role)).raise_for_status()
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": u} for u in users],
    }
    (await client.post(f"{RBAC_API}/clusterrolebindings", json=binding)).raise_for_status()


def _matches(values: list[str] | None, wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values or [])


def _grants_proxy(rule: JSON, cluster: str) -> bool:
    names = rule.get("resourceNames") or []
    if (
        _matches(rule.get("apiGroups"), "cluster.karmada.io")
        and _matches(rule.get("resources"), "clusters/proxy")
        and (not names or cluster in names)
    ):
        return True
    return _matches(rule.get("apiGroups"), "search.karmada.io") and _matches(
        rule.get("resources"), "proxying/proxy"
    )


def subjects_for(cluster: str, cluster_roles: list[JSON], bindings: list[JSON]) -> list[JSON]:
    """Who may reach `cluster` through the control plane's cluster proxy."""
    roles = {
        r["metadata"]["name"]
        for r in cluster_roles
        if any(_grants_proxy(rule, cluster) for rule in r.get("rules") or [])
    }
    return [
        subject
        for b in bindings
        if b.get("roleRef", {}).get("kind") == "ClusterRole" and b["roleRef"].get("name") in roles
        for subject in b.get("subjects") or []
    ]


def impersonation_rules(subjects: list[JSON]) -> list[JSON]:
    """GenerateImpersonationRules: users, service accounts, groups, each by sorted name."""
    kinds = (("User", "users"), ("ServiceAccount", "serviceaccounts"), ("Group", "groups"))
    rules = []
    for kind, resource in kinds:
        names = sorted({s["name"] for s in subjects if s.get("kind") == kind})
        if names:
            rules.append(
                {
                    "verbs": ["impersonate"],
                    "apiGroups": [""],
                    "resources": [resource],
                    "resourceNames": names,
                }
            )
    return rules


def _work(cluster: JSON, manifest: JSON) -> JSON:
    name = cluster["metadata"]["name"]
    namespace = f"karmada-es-{name}"
    work_name = generate_work_name(manifest["kind"], manifest["metadata"]["name"], "")
    shipped = copy.deepcopy(manifest)
    meta = shipped["metadata"]
    meta.setdefault("labels", {})["karmada.io/managed"] = "true"
    meta.setdefault("annotations", {}).update(
        {
            "resourcetemplate.karmada.io/uid": "",
            "work.karmada.io/name": work_name,
            "work.karmada.io/namespace": namespace,
        }
    )
    return {
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {
            "name": work_name,
            "namespace": namespace,
            "finalizers": ["karmada.io/execution-controller"],
            "ownerReferences": [
                {
                    "apiVersion": "cluster.karmada.io/v1alpha1",
                    "kind": "Cluster",
                    "name": name,
                    "uid": cluster["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"workload": {"manifests": [shipped]}},
    }


def impersonation_works(
    cluster: JSON, cluster_roles: list[JSON], bindings: list[JSON]
) -> list[JSON]:
    """The two Works unified-auth creates for `cluster` (none without an impersonatorSecretRef
    or when nobody may reach the cluster)."""
    ref = (cluster.get("spec") or {}).get("impersonatorSecretRef")
    if not ref:
        return []
    rules = impersonation_rules(subjects_for(cluster["metadata"]["name"], cluster_roles, bindings))
    labels = {"karmada.io/system": "true"}
    role = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": IMPERSONATOR, "labels": dict(labels)},
        "rules": rules,
    }
    binding = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": IMPERSONATOR, "labels": dict(labels)},
        "subjects": [
            {"kind": "ServiceAccount", "namespace": ref["namespace"], "name": IMPERSONATOR}
        ],
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": IMPERSONATOR},
    }
    return [_work(cluster, role), _work(cluster, binding)]


async def ship_impersonation(
    control_plane: httpx.AsyncClient, member: httpx.AsyncClient, cluster: str
) -> None:
    """Create unified-auth's Works for `cluster` (its execution namespace may still be on its
    way) and wait until the member has the impersonator's binding (the agent applies them)."""
    obj = (await control_plane.get(f"{CLUSTER_API}/{cluster}")).json()
    roles = (await control_plane.get(f"{RBAC_API}/clusterroles")).json()["items"]
    bindings = (await control_plane.get(f"{RBAC_API}/clusterrolebindings")).json()["items"]
    for work in impersonation_works(obj, roles, bindings):
        path = f"/apis/work.karmada.io/v1alpha1/namespaces/{work['metadata']['namespace']}/works"
        await polling.eventually(
            lambda p=path, w=work: control_plane.post(p, json=w),
            until=lambda r: r.status_code == 201,
            timeout=30,
            what=f"Work {work['metadata']['name']} created",
        )
    await polling.eventually(
        lambda: member.get(f"{RBAC_API}/clusterrolebindings/{IMPERSONATOR}"),
        until=lambda r: r.status_code == 200,
        timeout=30,
        what=f"the impersonator's RBAC applied on {cluster}",
    )


@contextlib.asynccontextmanager
async def tunnelled_agent(
    cp: Emulator, member_kc: Path, hub: Hub, directory: Path, cluster: str
) -> AsyncIterator[Tunnel]:
    """The agent for `cluster` in-process with its tunnel (yielded) through `hub`, connected; alice and
    mallory may use the cluster's proxy. Its control-plane credential is a client certificate:
    it also authenticates the agent to the proxy-server (mTLS against the control plane's CA)."""
    karmada_kc = cp.write_kubeconfig(
        directory / "karmada", user=f"system:karmada:agent:{cluster}", groups=["system:masters"]
    )
    ca_file = directory / "proxy-server-ca.crt"
    ca_file.write_bytes(hub.server_ca.cert_pem)
    async with cp.client() as front:
        rule = {**PROXY_RULE, "resourceNames": [cluster]}
        await grant(front, "edge-proxy", [rule], ["alice", "mallory"])
    async with running_agent(
        karmada_kc,
        member_kc,
        cluster,
        f"--tunnel-server-address={hub.agent_address}",
        f"--tunnel-server-ca-file={ca_file}",
        "--tunnel-server-name=localhost",
        f"--tunnel-proxy-url={hub.connect_url}",
    ) as (_, agent):
        tunnel = await polling.eventually(lambda: agent.tunnel, what="the tunnel built")
        await asyncio.wait_for(tunnel.connected.wait(), 20)
        yield tunnel
