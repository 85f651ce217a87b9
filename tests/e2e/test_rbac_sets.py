"""The agent under every RBAC a Karmada install gives it (issue 24 item 2): ours
(deploy/control-plane and deploy/base), `karmadactl register`'s and the Helm chart's (data in
tests/e2e/rbac/, written from upstream's source). Each set: the agent registers, applies a Work,
and is restarted with another provider, region and zones; it keeps running and applying Works.
Where the set allows updating the Cluster (ours, Helm's administrator credential) the spec
follows the flags; under register's, which grants neither update nor patch on clusters, the
Cluster stays as it was and the agent says why.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.app import run
from agent.kube.client import KubeClient
from agent.kube.resources import CONFIGMAPS, EVENTS, NAMESPACES
from agent.resources import CLUSTERS, WORKS
from emulator.emulator import Emulator, run_emulator
from emulator.kubeconfig import build_kubeconfig, write_kubeconfig
from emulator.works import configmap, control_plane_work

from .support import (
    DEPLOY,
    agent_options,
    client_for,
    cluster_ready,
    eventually,
    kubectl,
    service_account_token,
    work_applied,
)

pytestmark = pytest.mark.timeout(180)
CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
RBAC = Path(__file__).resolve().parent / "rbac"
FIRST = ("--cluster-provider=aws", "--cluster-region=us-east-1", "--cluster-zones=us-east-1a")
SECOND = (
    "--cluster-provider=gcp",
    "--cluster-region=europe-west4",
    "--cluster-zones=europe-west4-a,europe-west4-b",
)
# The resource templates' namespace: neither the execution namespace nor "default".
APPS = "apps"
FIRST_SPEC = {"provider": "aws", "region": "us-east-1", "zones": ["us-east-1a"]}
SECOND_SPEC = {
    "provider": "gcp",
    "region": "europe-west4",
    "zones": ["europe-west4-a", "europe-west4-b"],
}


@dataclass(frozen=True)
class RbacSet:
    name: str
    # What to apply on each side, and whether the agent's control-plane identity is the
    # administrator (Helm's values take a client certificate, in practice the admin's).
    control_plane: str | None
    member: str
    admin_identity: bool
    may_update_cluster: bool


SETS = [
    RbacSet("ours", "deploy/control-plane", "deploy/base", False, True),
    RbacSet(
        "karmadactl-register", "register-control-plane.yaml", "upstream-member.yaml", False, False
    ),
    RbacSet("helm", None, "upstream-member.yaml", True, True),
]


async def apply(kubeconfig: Path, source: str) -> None:
    if source.startswith("deploy/"):
        rendered = await kubectl(None, "kustomize", str(DEPLOY / source.removeprefix("deploy/")))
    else:
        rendered = (RBAC / source).read_text()
    await kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=rendered)


async def ensure_namespaces(client: KubeClient, *names: str) -> None:
    for name in names:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        try:
            await client.create(NAMESPACES, body)
        except Exception:
            await client.get(NAMESPACES, name)


@asynccontextmanager
async def installed(tmp: Path, rbac: RbacSet) -> AsyncIterator[tuple[Emulator, Path, Path, Path]]:
    """Both emulators with `rbac` applied; kubeconfigs: control-plane admin, the agent's on
    each side."""
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member,
    ):
        cp_admin = cp.write_kubeconfig(tmp / "cp-admin")
        member_admin = member.write_kubeconfig(tmp / "member-admin")
        admin = await client_for(cp_admin)
        member_client = await client_for(member_admin)
        try:
            # What register (and an administrator, for the others) creates first.
            await ensure_namespaces(admin, "karmada-cluster", ES, "karmada-system", APPS)
            await ensure_namespaces(member_client, "karmada-system", APPS)
        finally:
            await admin.close()
            await member_client.close()
        if rbac.control_plane is not None:
            await apply(cp_admin, rbac.control_plane)
        await apply(member_admin, rbac.member)
        token = await service_account_token(member_admin)
        member_agent = write_kubeconfig(
            tmp / "member-agent", build_kubeconfig(member.url, member.ca_pem, token=token)
        )
        if rbac.admin_identity:
            karmada_agent = cp_admin
        else:
            karmada_agent = cp.write_kubeconfig(
                tmp / "karmada-agent",
                user=f"system:karmada:agent:{CLUSTER}",
                groups=["system:karmada:agents"],
            )
        yield cp, cp_admin, karmada_agent, member_agent


@asynccontextmanager
async def agent(karmada_kc: Path, member_kc: Path, *flags: str) -> AsyncIterator[asyncio.Task[int]]:
    options = agent_options(
        karmada_kc,
        member_kc,
        CLUSTER,
        *flags,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run(options, stop_event=stop, install_signal_handlers=False))
    try:
        yield task
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0


async def template_synced(admin: KubeClient, name: str, uid: str) -> bool:
    events = (await admin.list(EVENTS, namespace=APPS))["items"]
    return any(
        e["reason"] == "SyncSucceed"
        and e["involvedObject"]
        == {"apiVersion": "v1", "kind": "ConfigMap", "namespace": APPS, "name": name, "uid": uid}
        for e in events
    )


@pytest.mark.parametrize("rbac", SETS, ids=[s.name for s in SETS])
async def test_restart_with_other_provider_region_and_zones(
    tmp_path: Path, rbac: RbacSet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with installed(tmp_path, rbac) as (_cp, cp_admin, karmada_kc, member_kc):
        admin = await client_for(cp_admin)
        try:

            def spec_of(cluster: dict[str, object]) -> dict[str, object]:
                spec = cluster["spec"]
                assert isinstance(spec, dict)
                return {k: spec.get(k) for k in ("provider", "region", "zones")}

            async def applied(task: asyncio.Task[int], name: str) -> bool:
                assert not task.done(), f"the agent exited with {task.result()}"
                return await work_applied(admin, CLUSTER, name) is not None

            async with agent(karmada_kc, member_kc, *FIRST) as task:
                await eventually(lambda: cluster_ready(admin, CLUSTER), timeout=30, what="Ready")
                assert spec_of(await admin.get(CLUSTERS, CLUSTER)) == FIRST_SPEC
                template = {**configmap("first"), "metadata": {"name": "first", "namespace": APPS}}
                work = control_plane_work(CLUSTER, "first", [template])
                await admin.create(WORKS, work, namespace=ES)
                await eventually(lambda: applied(task, "first"), timeout=30, what="first applied")
                # Its SyncSucceed on the resource template, in the template's own namespace.
                uid = work["spec"]["workload"]["manifests"][0]["metadata"]["annotations"][
                    "resourcetemplate.karmada.io/uid"
                ]
                await eventually(
                    lambda: template_synced(admin, "first", uid), timeout=30, what="template Event"
                )

            caplog.clear()
            async with agent(karmada_kc, member_kc, *SECOND) as task:
                work = control_plane_work(CLUSTER, "second", [configmap("second")])
                await admin.create(WORKS, work, namespace=ES)
                await eventually(lambda: applied(task, "second"), timeout=30, what="second applied")
                member = await client_for(member_kc)
                try:
                    await member.get(CONFIGMAPS, "second", namespace="default")
                finally:
                    await member.close()
                spec = spec_of(await admin.get(CLUSTERS, CLUSTER))
                if rbac.may_update_cluster:
                    assert spec == SECOND_SPEC
                else:
                    assert spec == FIRST_SPEC
                    assert "may not update it" in caplog.text
                    assert "spec.region ('us-east-1' -> 'europe-west4')" in caplog.text
                assert not task.done()
        finally:
            await admin.close()
