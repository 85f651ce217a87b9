"""Our agent's tunnel side by side with konnectivity's own Go `proxy-agent`, on the same stock
proxy-server.

    KARMADA_UPSTREAM_BIN=... python -m bench.tunnel_vs_proxy_agent [--requests 200]
        [--stream-mib 50] [--streams 100] [--exec-runs 20] [--out FILE]

Processes of their own: the emulated control plane and two members (bench.emulators), the
STOCK proxy-server (its CONNECT frontend relayed to TCP), our agent (`python -m agent`, tunnel
mode) for one member and `$KARMADA_UPSTREAM_BIN/proxy-agent` for the other. Each is reached as
karmada-aggregated-apiserver reaches a member: CONNECT through the proxy-server, then TLS.
The differences in what each carries, by design: our agent ends the control plane's TLS for the
route name (verified against the cluster's tunnel CA) and relays over a second TLS connection
to its member; the Go agent relays the control plane's TLS session to the member's address
unchanged (the member's own certificate, the member's address as the route).

Measured for each: latency added per request over the member directly (a new connection per
request, as the aggregated apiserver's proxy does, and one kept alive); the round trip of
`kubectl exec -- true`; `kubectl port-forward` throughput of a `--stream-mib` body; the agent's
RSS per open stream (`--streams` watches); the agent's CPU seconds per MiB carried.
Prints a table and writes JSON (default bench/results/tunnel_vs_proxy_agent.json).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import platform
import re
import ssl
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from agent.kube.client import GVR
from agent.kube.resources import SECRETS
from emulator import upstream
from emulator.konnectivity.stock import StockProxyServer
from emulator.pki import CertificateAuthority

from .agent_latency import cpu_seconds, rss_mib
from .emulators import EmulatorProcess, emulator_process
from .report import report
from .tunnel import (
    AGENT_USER,
    agent_process,
    answering,
    compare_latency,
    https_client,
    ms,
    registered,
    timed_kubectl,
)

CLUSTER = "edge-ours"
PODS = GVR.of("v1", "pods")
NAMESPACES = GVR.of("v1", "namespaces")
FORWARDING = re.compile(rb"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)")
JSON = dict[str, Any]


@contextlib.asynccontextmanager
async def go_proxy_agent(
    hub: StockProxyServer,
    cp: EmulatorProcess,
    directory: Path,
    *,
    agent_id: str = "go-bench",
    ca_file: Path | None = None,
) -> AsyncIterator[upstream.UpstreamProcess]:
    """proxy-agent for a member on this host: mTLS to the proxy-server with a Karmada client
    certificate (the client kubeconfig's), the members' host as its identifier; `ca_file` the
    proxy-server's CA (default `directory`/server-ca.crt)."""
    config = yaml.safe_load(cp.client_kubeconfig.read_text())
    user = config["users"][0]["user"]
    cert, key = directory / "go-agent.crt", directory / "go-agent.key"
    cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
    key.write_bytes(base64.b64decode(user["client-key-data"]))
    key.chmod(0o600)
    health = upstream.free_port()
    process = upstream.UpstreamProcess(
        "proxy-agent",
        [
            "--proxy-server-host=127.0.0.1",
            f"--proxy-server-port={hub.agent_address.rpartition(':')[2]}",
            f"--ca-cert={ca_file or directory / 'server-ca.crt'}",
            f"--agent-cert={cert}",
            f"--agent-key={key}",
            f"--agent-id={agent_id}",
            "--agent-identifiers=host=127.0.0.1",
            f"--health-server-port={health}",
            f"--admin-server-port={upstream.free_port()}",
            "--logtostderr=true",
        ],
        ready=upstream.http_ready(f"http://127.0.0.1:{health}/readyz"),
        workdir=directory,
    )
    await process.start(timeout=30)
    try:
        yield process
    finally:
        await process.stop()


def _pid(process: Any) -> int:
    found = getattr(process, "pid", None)
    if found is None:
        found = process.process.pid
    return int(found)


def kubeconfig(path: Path, server: str, ca_pem: bytes, token: str, proxy: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "m", "cluster": {
            "server": server, "proxy-url": proxy,
            "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": "u", "user": {"token": token.removeprefix("Bearer ")}}],
        "contexts": [{"name": "m", "context": {"cluster": "m", "user": "u"}}],
        "current-context": "m",
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


async def debug_pod(member: EmulatorProcess) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "debug", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "busybox",
                                 "ports": [{"containerPort": 8080}]}]},
    }  # fmt: skip
    await member.admin.create(PODS, pod, namespace="default")
    for _ in range(600):
        found = await member.admin.get(PODS, "debug", namespace="default")
        if (found.get("status") or {}).get("phase") == "Running":
            return
        await asyncio.sleep(0.05)  # poll interval of a wait-for-condition loop
    raise TimeoutError("the debug pod never ran")


async def port_forward(config: Path, mib: int, pid: int) -> JSON:
    """kubectl port-forward to the debug pod's 8080: MiB/s of one `mib` body, and the agent's
    CPU seconds per MiB while it passed."""
    process = await asyncio.create_subprocess_exec(
        "kubectl", f"--kubeconfig={config}", "port-forward", "--address=127.0.0.1",
        "pod/debug", ":8080", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        found = FORWARDING.search(await asyncio.wait_for(process.stdout.readline(), 30))
        if found is None:
            raise RuntimeError("kubectl port-forward did not start")
        url = f"http://127.0.0.1:{int(found.group(1))}"
        async with httpx.AsyncClient(base_url=url, timeout=300) as http:
            (await http.get("/")).raise_for_status()
            size = 0
            cpu_before = cpu_seconds(pid)
            started = time.perf_counter()
            async with http.stream("GET", f"/bytes/{mib * 2**20}") as response:
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
            elapsed = time.perf_counter() - started
            cpu = cpu_seconds(pid) - cpu_before
        return {
            "mib": round(size / 2**20, 1),
            "mib_s": round(size / 2**20 / elapsed, 1),
            "agent_cpu_s_per_mib": round(cpu / (size / 2**20), 4),
        }
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()


async def per_stream(via: Callable[[bool], httpx.AsyncClient], pid: int, streams: int) -> JSON:
    before = rss_mib(pid)
    clients = [via(True) for _ in range(streams)]
    responses = []
    for client in clients:
        request = client.build_request(
            "GET", "/api/v1/namespaces", params={"watch": "1", "timeoutSeconds": "300"}
        )
        responses.append(await client.send(request, stream=True))
    await asyncio.sleep(2)  # settle before sampling memory, not synchronisation
    during = rss_mib(pid)
    for response in responses:
        await response.aclose()
    for client in clients:
        await client.aclose()
    return {
        "streams": streams,
        "rss_before_mib": round(before, 1),
        "rss_open_mib": round(during, 1),
        "kib_per_stream": round((during - before) * 1024 / streams, 1),
    }


async def measure(
    label: str,
    via: Callable[[bool], httpx.AsyncClient],
    direct: Callable[[bool], httpx.AsyncClient],
    config: Path,
    pid: int,
    args: argparse.Namespace,
) -> JSON:
    async with via(True) as probe:
        await answering(probe, label)
    return {
        "latency": await compare_latency(via, direct, args.requests, "through"),
        "exec_round_trip": ms(
            await timed_kubectl(config, args.exec_runs, "exec", "debug", "--", "true")
        ),
        "port_forward": await port_forward(config, args.stream_mib, pid),
        "per_stream": await per_stream(via, pid, args.streams),
        "agent_rss_mib": round(rss_mib(pid), 1),
    }


async def run(args: argparse.Namespace) -> JSON:
    for name in ("proxy-server", "proxy-agent"):
        if upstream.binary(name) is None:
            raise SystemExit(f"this benchmark needs {name}: {upstream.missing_reason(name)}")
    directory = Path(tempfile.mkdtemp(prefix="bench-vs-go-"))
    results: JSON = {}
    async with (
        emulator_process("karmada", "karmada", directory, client_user=AGENT_USER) as cp,
        emulator_process("member", "ours", directory, client_user=AGENT_USER) as ours,
        emulator_process("member", "theirs", directory, client_user=AGENT_USER) as theirs,
    ):
        karmada_ca = cp.admin.transport.config.ca_pem
        assert karmada_ca is not None
        server_ca = CertificateAuthority.generate("konnectivity-ca")
        (directory / "server-ca.crt").write_bytes(server_ca.cert_pem)
        (directory / "proxy-server").mkdir()
        async with StockProxyServer(
            server_ca, cluster_ca_pem=karmada_ca, workdir=directory / "proxy-server"
        ) as hub:
            flags = (
                f"--tunnel-server-address={hub.agent_address}",
                f"--tunnel-server-ca-file={directory / 'server-ca.crt'}",
                "--tunnel-server-name=localhost",
                f"--tunnel-proxy-url={hub.connect_url}",
            )
            async with (
                agent_process(cp, ours, CLUSTER, directory, *flags) as our_agent,
                go_proxy_agent(hub, cp, directory) as go_agent,
            ):
                cluster = await registered(cp, CLUSTER, tunnel=True)
                spec = cluster["spec"]
                secret = await cp.admin.get(SECRETS, CLUSTER, namespace="karmada-cluster")
                tunnel_ca = base64.b64decode(secret["data"]["caBundle"])
                for member in (ours, theirs):
                    await debug_pod(member)
                for label, member, server, ca, pid in (
                    ("ours", ours, spec["apiEndpoint"], tunnel_ca, our_agent.pid),
                    ("go_proxy_agent", theirs, theirs.url, None, _pid(go_agent)),
                ):
                    member_ca = member.admin.transport.config.ca_pem
                    assert member_ca is not None
                    token = await member.admin.transport.config.token_source.authorization()  # type: ignore[union-attr]
                    assert token is not None
                    trust = ca or member_ca

                    def via(
                        keepalive: bool, s: str = server, c: bytes = trust, t: str = token
                    ) -> httpx.AsyncClient:
                        return httpx.AsyncClient(
                            base_url=s, proxy=hub.connect_url,
                            verify=ssl.create_default_context(cadata=c.decode()),
                            headers={"Authorization": t, "Accept-Encoding": "identity"},
                            limits=httpx.Limits(max_keepalive_connections=1 if keepalive else 0),
                            trust_env=False, timeout=120,
                        )  # fmt: skip

                    def direct(keepalive: bool, m: EmulatorProcess = member, c: bytes = member_ca,
                               t: str = token) -> httpx.AsyncClient:  # fmt: skip
                        return https_client(m.url, c, t, keepalive=keepalive)

                    config = kubeconfig(
                        directory / f"{label}.kubeconfig", server, trust, token, hub.connect_url
                    )
                    results[label] = await measure(label, via, direct, config, pid, args)
    results["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--stream-mib", type=int, default=50)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--exec-runs", type=int, default=20)
    parser.add_argument("--out", default="bench/results/tunnel_vs_proxy_agent.json")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args))
    report(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
