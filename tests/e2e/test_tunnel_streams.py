"""Operating a pull cluster behind NAT through our agent's tunnel with the real kubectl: exec
(WebSocket and SPDY, TTY, exit codes), attach, port-forward carrying 50 MiB intact, and
`kubectl top` (the member's metrics.k8s.io), each an upgraded or aggregated request that goes
control plane side -> proxy-server -> the agent's tunnel -> the member.

kubectl is given what karmada-aggregated-apiserver's cluster proxy uses to reach the cluster,
all of it from the control plane: the Cluster's apiEndpoint (the tunnel route, a name that never
resolves) and proxyURL (the proxy-server's HTTP CONNECT), the Secret's caBundle, the
impersonator's token, and the user to act for (`as`). The member's RBAC decides: alice may
exec, attach, port-forward and read metrics; mallory (whom the control plane lets through) may
only read pods, and gets the member's 403 for the rest. tests/e2e/test_tunnel_aggregated.py runs the same through the
unmodified karmada-aggregated-apiserver and karmadactl.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml

from agent.kube.resources import SECRETS
from agent.resources import CLUSTERS
from emulator.controllers import Knobs
from emulator.emulator import Emulator, run_emulator
from emulator.kubelet.ports import pattern
from tests import polling
from tests.agent.tunnel.harness import HUB_KINDS, Hub, open_hub
from tests.e2e.cluster_proxy import grant, ship_impersonation, tunnelled_agent
from tests.e2e.support import client_for
from tests.kubectl_streams import FORWARDING, WIRES, kubectl_on_terminal
from tests.kubectl_streams import kubectl_result as kubectl

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

CLUSTER = "edge-nat"
PODS = "/api/v1/namespaces/default/pods"
OPERATE_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    {
        "apiGroups": [""],
        "resources": ["pods/exec", "pods/attach", "pods/portforward"],
        "verbs": ["get", "create"],
    },
    {"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": ["get", "list"]},
]


@dataclass
class Bed:
    cp: Emulator
    member: Emulator
    hub: Hub
    dir: Path
    endpoint: str
    ca_bundle: str
    token: str

    def kubeconfig(self, user: str) -> Path:
        """A kubeconfig reaching the member as the cluster proxy does, acting for `user`."""
        path = self.dir / f"{user}-tunnel.kubeconfig"
        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": CLUSTER,
                    "cluster": {
                        "server": self.endpoint,
                        "proxy-url": self.hub.connect_url,
                        "certificate-authority-data": self.ca_bundle,
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": self.token, "as": user}}],
            "contexts": [{"name": CLUSTER, "context": {"cluster": CLUSTER, "user": user}}],
            "current-context": CLUSTER,
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=HUB_KINDS)
async def bed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Bed]:
    directory = tmp_path_factory.mktemp("streams")
    knobs = Knobs(workload_ready_delay=0.05)
    async with (
        run_emulator("karmada", name="karmada") as cp,
        run_emulator("member", name=CLUSTER, knobs=knobs) as member,
        open_hub(request.param, cluster_ca_pem=cp.ca_pem) as hub,
    ):
        member_kc = member.write_kubeconfig(directory / "member")
        async with tunnelled_agent(cp, member_kc, hub, directory, CLUSTER):
            karmada = await client_for(cp.write_kubeconfig(directory / "cp-admin"))
            cluster = await polling.eventually(
                lambda: karmada.get(CLUSTERS, CLUSTER), retry_on=(Exception,), what="registered"
            )
            secret = await karmada.get(SECRETS, CLUSTER, namespace="karmada-cluster")
            impersonator = await karmada.get(
                SECRETS, f"{CLUSTER}-impersonator", namespace="karmada-cluster"
            )
            await karmada.close()
            async with cp.client() as front, member.client() as admin:
                await ship_impersonation(front, admin, CLUSTER)
                await grant(admin, "alice-operates", OPERATE_RULES, ["alice"])
                await grant(admin, "mallory-views", OPERATE_RULES[:1], ["mallory"])
                await _running(admin, "web", ports=[{"containerPort": 8080}])
                await _running(admin, "shell", command=["sh"], stdin=True, stdinOnce=True)
            yield Bed(
                cp,
                member,
                hub,
                directory,
                cluster["spec"]["apiEndpoint"],
                secret["data"]["caBundle"],
                base64.b64decode(impersonator["data"]["token"]).decode(),
            )


async def _running(admin: httpx.AsyncClient, name: str, **container: Any) -> None:
    spec = {"name": "app", "image": "busybox", **container}
    body = {"metadata": {"name": name}, "spec": {"containers": [spec]}}
    (await admin.post(PODS, json=body)).raise_for_status()
    await polling.eventually(
        lambda: admin.get(f"{PODS}/{name}"),
        until=lambda r: r.json().get("status", {}).get("phase") == "Running",
        what=f"pod {name} running",
    )


@pytest.fixture(params=sorted(WIRES))
def wire(request: pytest.FixtureRequest) -> dict[str, str]:
    return dict(WIRES[request.param])


async def test_exec_carries_output_stdin_and_the_exit_code(bed: Bed, wire: dict[str, str]) -> None:
    config = bed.kubeconfig("alice")
    code, out, err = await kubectl(
        config, "exec", "web", "--", "sh", "-c", "echo ok; echo oops >&2; exit 3", env=wire
    )
    assert (code, out) == (3, "ok\n")
    assert "oops" in err
    assert "command terminated with exit code 3" in err
    text = os.urandom(300 * 1024).hex().encode()
    code, out, _ = await kubectl(
        config, "exec", "-i", "web", "--", "sh", "-c", "sha256sum; exit 5", env=wire, stdin=text
    )
    assert code == 5
    assert out.split()[0] == hashlib.sha256(text).hexdigest()


async def test_exec_with_a_terminal(bed: Bed, wire: dict[str, str]) -> None:
    script = "until [ \"$(stty size)\" = '40 120' ]; do :; done; tty; stty size; exit 2"
    code, output = await kubectl_on_terminal(
        bed.kubeconfig("alice"), "exec", "-it", "web", "--", "sh", "-c", script,
        env=wire, size=(120, 40),
    )  # fmt: skip
    assert code == 2, output
    lines = output.decode().split("\r\n")
    assert lines[0].startswith("/dev/pts/")
    assert lines[1] == "40 120"


async def test_attach_joins_the_main_process(bed: Bed, wire: dict[str, str]) -> None:
    typed = b"echo attached through the tunnel; exit 0\n"
    code, out, _ = await kubectl(
        bed.kubeconfig("alice"), "attach", "-i", "shell", env=wire, stdin=typed
    )
    assert (code, out) == (0, "attached through the tunnel\n")


async def test_port_forward_carries_fifty_mib_intact(bed: Bed, wire: dict[str, str]) -> None:
    size = 50 * 1024 * 1024
    expected = hashlib.sha256()
    for chunk in pattern(size):
        expected.update(chunk)
    upload = os.urandom(4 * 1024 * 1024)
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(bed.kubeconfig("alice")), "port-forward",
        "--address=127.0.0.1", "pod/web", ":8080",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, **wire},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        found = FORWARDING.search(await asyncio.wait_for(process.stdout.readline(), 30))
        assert found is not None
        base = f"http://127.0.0.1:{int(found.group(1))}"
        async with httpx.AsyncClient(base_url=base, timeout=120) as http:
            assert (await http.get("/")).text == "pod default/web container app port 8080\n"
            received = hashlib.sha256()
            async with http.stream("GET", f"/bytes/{size}") as response:
                async for chunk in response.aiter_bytes():
                    received.update(chunk)
            assert received.hexdigest() == expected.hexdigest()
            assert (await http.post("/echo", content=upload)).content == upload
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()


async def test_kubectl_top_reads_the_members_metrics(bed: Bed) -> None:
    code, out, err = await kubectl(bed.kubeconfig("alice"), "top", "pods")
    assert code == 0, err
    assert sorted(line.split()[0] for line in out.strip().splitlines()[1:]) == ["shell", "web"]


async def test_a_user_the_member_forbids_gets_the_members_403(
    bed: Bed, wire: dict[str, str]
) -> None:
    code, _, err = await kubectl(bed.kubeconfig("mallory"), "exec", "web", "--", "true", env=wire)
    assert code == 1
    assert 'User "mallory" cannot' in err
    assert 'resource "pods/exec" in API group "" in the namespace "default"' in err
    code, _, err = await kubectl(bed.kubeconfig("mallory"), "top", "pods")
    assert code == 1
    assert 'User "mallory" cannot list resource "pods" in API group "metrics.k8s.io"' in err
