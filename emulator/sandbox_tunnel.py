"""`make sandbox ARGS=--tunnel`: a member the control plane cannot dial, reached through the
stock components and the agent's tunnel.

The emulated Karmada control plane with the unmodified karmada-aggregated-apiserver behind its
aggregation layer (Clusters in its own etcd), the stock ANP proxy-server, a member emulator,
and the real agent (`python -m agent`) in tunnel mode between them. The Cluster's apiEndpoint
is the tunnel route, a name that never resolves: every request below goes kubectl ->
control plane -> karmada-aggregated-apiserver -> proxy-server -> the agent's tunnel -> member.
Shows `kubectl get --raw` through the cluster proxy, a pod's log, an exec (its exit code
carried back) and `kubectl top`. Without $KARMADA_UPSTREAM_BIN (or Debian's etcd) it says
what is missing and how to get it, and exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import yaml

from . import upstream
from .emulator import Emulator, run_emulator
from .konnectivity.stock import BINARY as PROXY_SERVER
from .konnectivity.stock import StockProxyServer
from .pki import CertificateAuthority
from .upstream import KarmadaAggregatedApiserver

CLUSTER = "edge-1"
OPERATOR = "operator"
NAMESPACE = "ops"
CLUSTER_API = "/apis/cluster.karmada.io/v1alpha1/clusters"
APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
JSON = dict[str, Any]


def missing() -> list[str]:
    """What the tunnel sandbox needs and does not find, each with the reason."""
    reasons = []
    for name in (upstream.AGGREGATED_APISERVER, PROXY_SERVER):
        if upstream.binary(name) is None:
            reasons.append(f"{name}: {upstream.missing_reason(name)}")
    etcd = upstream.etcd_missing_reason()
    if etcd is not None:
        reasons.append(f"etcd: {etcd}")
    return reasons


def _say(text: str = "") -> None:
    print(text, flush=True)


async def _kubectl(kubeconfig: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def _until(what: str, check: Any, timeout: float) -> Any:
    """`check()`'s first truthy answer (exceptions count as not yet), or TimeoutError."""
    async with asyncio.timeout(timeout):
        while True:
            with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
                found = await check()
                if found:
                    return found
            await asyncio.sleep(0.2)  # poll interval of a wait-for-condition loop
    raise TimeoutError(what)  # unreachable: the timeout raises first


async def _grant(client: httpx.AsyncClient, name: str, rules: list[JSON], subject: JSON) -> None:
    """A ClusterRole `name` with `rules`, bound to `subject`."""
    role = {"metadata": {"name": name}, "rules": rules}
    (await client.post(f"{RBAC}/clusterroles", json=role)).raise_for_status()
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [subject],
    }
    (await client.post(f"{RBAC}/clusterrolebindings", json=binding)).raise_for_status()


async def _aggregate(cp: Emulator, server: KarmadaAggregatedApiserver, timeout: float) -> None:
    async with cp.client() as client:
        service = server.service()
        path = f"/api/v1/namespaces/{service['metadata']['namespace']}/services"
        (await client.post(path, json=service)).raise_for_status()
        (await client.post(APISERVICES, json=server.apiservice())).raise_for_status()

        async def available() -> bool:
            obj = (await client.get(f"{APISERVICES}/v1alpha1.cluster.karmada.io")).json()
            return any(
                c["type"] == "Available" and c["status"] == "True"
                for c in (obj.get("status") or {}).get("conditions") or []
            )

        await _until("karmada-aggregated-apiserver Available", available, timeout)


async def _member_setup(member: Emulator, timeout: float) -> str:
    """The operator's rights on the member, the impersonation unified-auth would ship, and a
    pod to operate on; the pod's name."""
    async with member.client() as admin:
        user = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OPERATOR}
        await _grant(admin, "operator-admin", [{"apiGroups": ["*"], "resources": ["*"],
                                                "verbs": ["*"]}], user)  # fmt: skip
        impersonator = {"kind": "ServiceAccount", "namespace": "karmada-cluster",
                        "name": "karmada-impersonator"}  # fmt: skip
        rules = [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
                  "resourceNames": [OPERATOR]}]  # fmt: skip
        await _grant(admin, "karmada-impersonator", rules, impersonator)
        (
            await admin.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
        ).raise_for_status()
        pod = {
            "metadata": {"name": "debug", "labels": {"app": "debug"}},
            "spec": {"containers": [{"name": "shell", "image": "busybox",
                                     "ports": [{"containerPort": 8080}]}]},
        }  # fmt: skip
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        (await admin.post(path, json=pod)).raise_for_status()

        async def running() -> bool:
            found = (await admin.get(f"{path}/debug")).json()
            return (found.get("status") or {}).get("phase") == "Running"

        await _until("the debug pod running", running, timeout)
    return "debug"


def _proxy_kubeconfig(source: Path, cp: Emulator, target: Path) -> Path:
    config = yaml.safe_load(source.read_text())
    config["clusters"][0]["cluster"]["server"] = f"{cp.url}{CLUSTER_API}/{CLUSTER}/proxy"
    target.write_text(yaml.safe_dump(config))
    target.chmod(0o600)
    return target


async def _show(what: str, kubeconfig: Path, *args: str, expect: int = 0) -> str:
    _say(f"$ kubectl {shlex.join(args)}    # {what}")
    code, out = await _kubectl(kubeconfig, *args)
    _say(out.rstrip())
    if code != expect:
        raise RuntimeError(f"kubectl {shlex.join(args)} exited {code}, expected {expect}")
    _say()
    return out


async def run(directory: Path, timeout: float) -> int:
    reasons = missing()
    if reasons:
        _say("sandbox --tunnel runs the unmodified upstream components, and some are missing:")
        for reason in reasons:
            _say(f"  - {reason}")
        _say(
            "Build the binaries with shared/tools/build-upstream (it writes them to "
            "~/.cache/karmada-upstream/bin)"
            + (", install Debian's etcd-server" if upstream.etcd_missing_reason() else "")
            + ", then run:\n"
            f"  {upstream.ENV}=$HOME/.cache/karmada-upstream/bin make sandbox ARGS=--tunnel"
        )
        return 1
    _say("[1/4] control plane with karmada-aggregated-apiserver, the stock proxy-server, a member")
    async with contextlib.AsyncExitStack() as stack:
        cp = await stack.enter_async_context(run_emulator("karmada", name="karmada"))
        server = KarmadaAggregatedApiserver(directory)
        cp.api.services[server.SERVICE_KEY] = server.address
        await server.start(
            cp.write_kubeconfig(
                directory / "aggregated-apiserver.kubeconfig",
                user="system:karmada:karmada-aggregated-apiserver",
                groups=["system:masters"],
            )
        )
        stack.push_async_callback(server.stop)
        await _aggregate(cp, server, timeout)
        hub_ca = CertificateAuthority.generate("konnectivity-ca")
        # A short path of its own: the proxy-server's unix socket must fit in 108 bytes.
        hub_dir = Path(tempfile.mkdtemp(prefix="sandbox-proxy-server-"))
        stack.callback(shutil.rmtree, hub_dir, True)
        hub = StockProxyServer(hub_ca, cluster_ca_pem=cp.ca_pem, workdir=hub_dir)
        await hub.start()
        stack.push_async_callback(hub.stop)
        member = await stack.enter_async_context(run_emulator("member", name=CLUSTER))
        pod = await _member_setup(member, timeout)
        ca_file = directory / "proxy-server-ca.crt"
        ca_file.write_bytes(hub_ca.cert_pem)
        agent_log = directory / "agent.log"
        log = agent_log.open("wb")
        agent = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agent",
            f"--karmada-kubeconfig={cp.write_kubeconfig(directory / 'agent-karmada.kubeconfig', user=f'system:karmada:agent:{CLUSTER}', groups=['system:masters'])}",
            f"--kubeconfig={member.write_kubeconfig(directory / 'member.kubeconfig')}",
            f"--cluster-name={CLUSTER}",
            "--leader-elect=false",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
            "--cluster-status-update-frequency=2s",
            f"--tunnel-server-address={hub.agent_address}",
            f"--tunnel-server-ca-file={ca_file}",
            "--tunnel-server-name=localhost",
            f"--tunnel-proxy-url={hub.connect_url}",
            stdout=log, stderr=log,
        )  # fmt: skip
        log.close()

        async def stop_agent() -> None:
            if agent.returncode is None:
                agent.terminate()
                await agent.wait()

        stack.push_async_callback(stop_agent)
        _say(f"      control plane {cp.url}; member {member.url}; agent log {agent_log}")
        async with cp.client() as front:
            rule = {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters/proxy"],
                    "verbs": ["*"], "resourceNames": [CLUSTER]}  # fmt: skip
            user = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OPERATOR}
            await _grant(front, "edge-proxy", [rule], user)

            async def ready() -> JSON | None:
                if agent.returncode is not None:
                    raise RuntimeError(f"the agent exited {agent.returncode}; see {agent_log}")
                found = await front.get(f"{CLUSTER_API}/{CLUSTER}")
                if found.status_code != 200:
                    return None
                cluster: JSON = found.json()
                conditions = (cluster.get("status") or {}).get("conditions") or []
                ok = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
                return cluster if ok else None

            _say("[2/4] the agent registers through the aggregated apiserver, tunnel up ...")
            cluster = await _until("the Cluster Ready", ready, timeout)
        spec = cluster["spec"]
        _say(
            f"      apiEndpoint {spec['apiEndpoint']} (never resolves); proxyURL {spec['proxyURL']}"
        )
        operator = cp.write_kubeconfig(directory / "operator.kubeconfig", user=OPERATOR)
        proxied = _proxy_kubeconfig(operator, cp, directory / "operator-edge-1.kubeconfig")
        _say(f"[3/4] as {OPERATOR}, through the cluster proxy ({proxied}):")
        raw = await _show(
            "the member's kube-system, through the tunnel", operator, "get", "--raw",
            f"{CLUSTER_API}/{CLUSTER}/proxy/api/v1/namespaces/kube-system",
        )  # fmt: skip
        if json.loads(raw)["metadata"]["name"] != "kube-system":
            raise RuntimeError("get --raw did not return the member's kube-system")
        await _show("a log", proxied, "logs", "-n", NAMESPACE, pod, "--tail=2")
        out = await _show(
            "an exec, its exit code carried back", proxied, "exec", "-n", NAMESPACE, pod, "--",
            "sh", "-c", "echo hello from $HOSTNAME on the edge; exit 3", expect=3,
        )  # fmt: skip
        if "hello from debug on the edge" not in out:
            raise RuntimeError("the exec's output did not come back")
        await _show("the member's metrics-server", proxied, "top", "pods", "-n", NAMESPACE)
        _say("[4/4] stopping the agent ...")
        await stop_agent()
        _say(f"      the agent stopped with exit code {agent.returncode}")
        if agent.returncode != 0:
            return 1
    _say("sandbox --tunnel: all steps passed")
    return 0
