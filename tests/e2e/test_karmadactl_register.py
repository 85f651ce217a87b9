"""Installed the way users install it: the stock `karmadactl register --karmada-agent-image=<ours>`
against the emulated control plane and member, then our agent started from exactly the
Deployment register created (its command and args, the mounted `karmada-kubeconfig` Secret, the
ServiceAccount token; tests/e2e/pod_sandbox.py). It joins, goes Ready, applies a Work, rotates
its certificate into register's Secret layout (`karmada-system/karmada-kubeconfig`, key
`karmada-kubeconfig`) and keeps working on the new one; `karmadactl unregister`, which finds the
agent's credentials through that Deployment and Secret, then removes the cluster cleanly.

Needs KARMADA_UPSTREAM_BIN (karmadactl) and a private mount namespace (root); skips with the
reason otherwise. The control plane signs certificates for two minutes, backdated ten, so the
registered certificate has 2/12 of its lifetime left, under the default rotation threshold
(0.2): the agent's first check, at start, rotates it, with the Deployment's flags unchanged.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.certificates import certificate_lifetime, subject_of
from agent.kube.client import KubeClient
from agent.kube.errors import NotFoundError
from agent.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    DEPLOYMENTS,
    NAMESPACES,
    SECRETS,
    SERVICE_ACCOUNTS,
)
from agent.resources import CLUSTERS, WORKS
from emulator.controllers import Knobs
from emulator.emulator import run_emulator
from emulator.upstream import binary, missing_reason
from emulator.works import configmap, control_plane_work

from .pod_sandbox import joins_and_applies, sandbox_missing_reason, start_pod_container
from .support import client_for, eventually, work_applied

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
NAMESPACE = "karmada-system"
# What a user passes: our image in place of docker.io/karmada/karmada-agent.
IMAGE = "ghcr.io/karmada-pull-agent/karmada-agent:0.1.0"
KARMADACTL = binary("karmadactl")
SANDBOX = sandbox_missing_reason()

pytestmark = [
    pytest.mark.skipif(KARMADACTL is None, reason=missing_reason("karmadactl")),
    pytest.mark.skipif(SANDBOX is not None, reason=SANDBOX or ""),
    pytest.mark.timeout(300),
]
JSON = dict[str, Any]


async def karmadactl(*args: str, timeout: float = 120) -> str:
    assert KARMADACTL is not None
    process = await asyncio.create_subprocess_exec(
        str(KARMADACTL), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    if process.returncode != 0:
        raise AssertionError(
            f"karmadactl {' '.join(args[:2])} failed ({process.returncode}): "
            f"{out.decode()[-2000:]}{err.decode()[-3000:]}"
        )
    return out.decode() + err.decode()


def agent_kubeconfig(secret: JSON, key: str) -> JSON:
    document: JSON = yaml.safe_load(base64.b64decode(secret["data"][key]))
    return document


def client_certificate(kubeconfig: JSON) -> bytes:
    context = next(c for c in kubeconfig["contexts"] if c["name"] == kubeconfig["current-context"])
    user = next(u for u in kubeconfig["users"] if u["name"] == context["context"]["user"])
    return base64.b64decode(user["user"]["client-certificate-data"])


async def gone(client: KubeClient, gvr: Any, name: str, namespace: str | None = None) -> bool:
    try:
        await client.get(gvr, name, namespace=namespace)
    except NotFoundError:
        return True
    return False


async def test_register_join_work_rotation_and_unregister(tmp_path: Path) -> None:
    knobs = Knobs(csr_max_duration=timedelta(minutes=2), csr_backdate=timedelta(minutes=10))
    async with (
        run_emulator("karmada", name="karmada", knobs=knobs) as cp,
        run_emulator("member", name=CLUSTER) as member_emulator,
    ):
        cp_kc = cp.write_kubeconfig(tmp_path / "karmada.kubeconfig")
        member_kc = member_emulator.write_kubeconfig(tmp_path / "member.kubeconfig")
        karmada = await client_for(cp_kc)
        member = await client_for(member_kc)
        try:
            printed = await karmadactl(
                "token", "create", "--kubeconfig", str(cp_kc), "--print-register-command"
            )
            register = next(
                line.split() for line in printed.splitlines() if " register " in f" {line} "
            )
            assert register[1] == "register"
            out = await karmadactl(
                *register[1:], "--kubeconfig", str(member_kc), f"--cluster-name={CLUSTER}",
                f"--karmada-agent-image={IMAGE}", "--discovery-timeout=60s",
            )  # fmt: skip
            assert f"cluster({CLUSTER}) is joined successfully" in out

            deployment = await member.get(DEPLOYMENTS, "karmada-agent", namespace=NAMESPACE)
            container = deployment["spec"]["template"]["spec"]["containers"][0]
            assert container["image"] == IMAGE
            assert "--karmada-kubeconfig=/etc/kubeconfig/karmada-kubeconfig" in container["command"]
            registered = client_certificate(
                agent_kubeconfig(
                    await member.get(SECRETS, "karmada-kubeconfig", namespace=NAMESPACE),
                    "karmada-kubeconfig",
                )
            )
            registered_lifetime = certificate_lifetime(registered)
            assert registered_lifetime.remaining_fraction() <= 0.2

            agent = await start_pod_container(
                member_emulator, member_kc, member, NAMESPACE, "karmada-agent", tmp_path / "pod"
            )
            try:
                await _joined_applies_and_rotates(
                    agent, karmada, member, registered, registered_lifetime.not_after
                )
                # Unregister refuses while Works remain: they go first, as a user's would.
                await karmada.delete(WORKS, "after-rotation", namespace=ES)
                await karmada.delete(WORKS, "first", namespace=ES)

                async def works_gone() -> bool:
                    return not (await karmada.list(WORKS, namespace=ES)).get("items")

                await eventually(works_gone, timeout=30, what="the Works deleted")
                out = await karmadactl(
                    "unregister", CLUSTER, "--cluster-kubeconfig", str(member_kc), "--wait=60s"
                )
                # With the agent's own credentials (the rotated certificate in the Secret the
                # Deployment mounts), as unregister finds them without --karmada-config.
                assert f"Successfully delete cluster object ({CLUSTER}) from control plane" in out
                assert "Secret karmada-kubeconfig karmada-system" in out, out
                await _removed_cleanly(karmada, member)
            finally:
                code = await agent.stop()
                assert code == 0, f"the agent exited {code}:\n{agent.log()}"
        finally:
            await karmada.close()
            await member.close()


async def _joined_applies_and_rotates(
    agent: Any, karmada: KubeClient, member: KubeClient, registered: bytes, old_expiry: Any
) -> None:
    await joins_and_applies(agent, karmada, member, CLUSTER, "first", "registered")

    # Rotated into register's layout: same Secret, same key, the current context's user.
    async def rotated() -> bytes | None:
        secret = await member.get(SECRETS, "karmada-kubeconfig", namespace=NAMESPACE)
        assert set(secret["data"]) == {"karmada-kubeconfig"}
        cert = client_certificate(agent_kubeconfig(secret, "karmada-kubeconfig"))
        return cert if cert != registered else None

    new_cert = await eventually(rotated, timeout=60, what="the rotated certificate in the Secret")
    assert certificate_lifetime(new_cert).not_after > old_expiry
    assert subject_of(new_cert) == subject_of(registered)
    assert subject_of(new_cert).common_name == f"system:karmada:agent:{CLUSTER}"
    # And it keeps working on it.
    await karmada.create(
        WORKS,
        control_plane_work(CLUSTER, "after-rotation", [configmap("after-rotation")]),
        namespace=ES,
    )
    await eventually(
        lambda: work_applied(karmada, CLUSTER, "after-rotation"),
        timeout=30,
        what="a Work applied after the rotation",
    )


async def _removed_cleanly(karmada: KubeClient, member: KubeClient) -> None:
    await eventually(lambda: gone(karmada, CLUSTERS, CLUSTER), timeout=30, what="Cluster gone")
    await eventually(
        lambda: gone(karmada, NAMESPACES, ES), timeout=30, what="the execution namespace gone"
    )
    for gvr, name, namespace in (
        (DEPLOYMENTS, "karmada-agent", NAMESPACE),
        (SERVICE_ACCOUNTS, "karmada-agent-sa", NAMESPACE),
        (SECRETS, "karmada-kubeconfig", NAMESPACE),
        (CLUSTER_ROLES, "karmada-agent", None),
        (CLUSTER_ROLE_BINDINGS, "karmada-agent", None),
    ):
        await eventually(
            lambda gvr=gvr, name=name, namespace=namespace: gone(member, gvr, name, namespace),
            timeout=30,
            what=f"{gvr.resource} {name} removed from the member",
        )
