"""The tunnel's cost: latency, throughput, memory per stream, idle traffic, RSS off vs on, and
the latency of the whole user path.

    python -m bench.tunnel [--requests 200] [--stream-mib 50] [--streams 50] [--max-streams N]
                           [--idle-seconds 60] [--kubectl-runs 20] [--out FILE]

Processes of their own: the emulated control plane and member (bench.emulators), the STOCK
proxy-server ($KARMADA_UPSTREAM_BIN/proxy-server, its unix-socket CONNECT frontend relayed to TCP
in this process), and two real agents (`python -m agent`), each with a member of its own: one
with the tunnel, one without.
The client reaches the member as karmada-aggregated-apiserver does, from what the control
plane holds: CONNECT to the Cluster's proxyURL for its apiEndpoint, TLS verified against the
Cluster Secret's caBundle.

Measured:
- latency added per request: GET /api/v1/namespaces/default through the tunnel vs directly,
  a new connection per request (the aggregated apiserver's proxy transport disables
  keep-alive) and on one kept-alive connection;
- throughput of one `--stream-mib` response (ConfigMaps listed uncompressed) through the
  tunnel vs directly;
- the tunnelled agent's RSS per open stream (`--streams` watches held open; beyond the agent's
  `--tunnel-max-streams`, set with `--max-streams`, refused with 429), a Work's delivery while
  they are open, and the RSS after they closed;
- idle cost: keepalive pings per minute (the agent's own counter) and the agent's CPU seconds
  over `--idle-seconds`;
- RSS after registration and an idle period, tunnel off vs on;
- with the unmodified karmada-aggregated-apiserver and Debian's etcd present, the whole user path:
  the control-plane emulator's aggregation layer sends cluster.karmada.io to the aggregated
  apiserver (Clusters in its etcd; the agents register through it), whose cluster proxy reaches
  the member through the proxy-server and the tunnel: GET
  /apis/cluster.karmada.io/v1alpha1/clusters/<name>/proxy/api/v1/namespaces/default at the control
  plane vs the same GET at the member, over an HTTP client (a new connection each, and kept
  alive) and as `kubectl get --raw` (`--kubectl-runs` of each, the process's own start included
  in both).
Prints a table and writes JSON (default bench/results/tunnel.json).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import platform
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from agent.kube.client import GVR
from agent.kube.errors import KubeError
from agent.kube.resources import CONFIGMAPS, NAMESPACES, SECRETS
from agent.resources import CLUSTERS, WORKS
from emulator import upstream
from emulator.konnectivity.stock import StockProxyServer
from emulator.pki import CertificateAuthority
from emulator.upstream import KarmadaAggregatedApiserver
from emulator.works import configmap, control_plane_work

from .agent_latency import cpu_seconds, rss_mib, wait_until
from .emulators import EmulatorProcess, emulator_process
from .report import report

CLUSTER = "edge-bench"
OTHER = "edge-plain"
AGENT_USER = "karmada-agent-bench"
JSON = dict[str, Any]
CONFIGMAP_BYTES = 1024 * 1024 - 4096


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def ms(values: list[float]) -> JSON:
    return {
        "p50_ms": round(statistics.median(values) * 1000, 2),
        "p90_ms": round(percentile(values, 0.9) * 1000, 2),
    }


@contextlib.asynccontextmanager
async def agent_process(
    cp: EmulatorProcess, member: EmulatorProcess, cluster: str, directory: Path, *flags: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    log = (directory / f"agent-{cluster}.log").open("wb")
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent",
        f"--karmada-kubeconfig={cp.client_kubeconfig}", f"--kubeconfig={member.admin_kubeconfig}",
        f"--cluster-name={cluster}", "--leader-elect=false",
        "--metrics-bind-address=0", "--health-probe-bind-address=0", *flags,
        stdout=log, stderr=log,
    )  # fmt: skip
    try:
        yield agent
    finally:
        with contextlib.suppress(ProcessLookupError):
            agent.terminate()
        await agent.wait()
        log.close()


async def registered(cp: EmulatorProcess, cluster: str, *, tunnel: bool) -> JSON:
    for _ in range(1200):
        with contextlib.suppress(KubeError):
            obj = await cp.admin.get(CLUSTERS, cluster)
            spec = obj.get("spec") or {}
            if not tunnel or spec.get("proxyURL"):
                return obj
        await asyncio.sleep(0.05)  # poll interval of a wait-for-condition loop
    raise TimeoutError(f"Cluster {cluster} was not registered")


def tunnel_client(spec: JSON, ca_bundle: str, token: str, *, keepalive: bool) -> httpx.AsyncClient:
    context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    return httpx.AsyncClient(
        base_url=spec["apiEndpoint"],
        proxy=spec["proxyURL"],
        verify=context,
        headers={"Authorization": token, "Accept-Encoding": "identity"},
        limits=httpx.Limits(max_keepalive_connections=1 if keepalive else 0),
        trust_env=False,
        timeout=120,
    )


def https_client(url: str, ca_pem: bytes, token: str, *, keepalive: bool) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=url,
        verify=ssl.create_default_context(cadata=ca_pem.decode()),
        headers={"Authorization": token, "Accept-Encoding": "identity"},
        limits=httpx.Limits(max_keepalive_connections=1 if keepalive else 0),
        trust_env=False,
        timeout=120,
    )


def direct_client(member: EmulatorProcess, token: str, *, keepalive: bool) -> httpx.AsyncClient:
    config = member.admin.transport.config
    assert config.ca_pem is not None
    return https_client(member.url, config.ca_pem, token, keepalive=keepalive)


async def answering(probe: httpx.AsyncClient, what: str) -> None:
    """Wait until the member answers through `probe`."""
    for _ in range(600):
        with contextlib.suppress(httpx.HTTPError):
            if (await probe.get("/api/v1/namespaces/default")).status_code == 200:
                return
        await asyncio.sleep(0.05)  # poll interval of a wait-for-condition loop
    raise TimeoutError(f"the member never answered through {what}")


async def timed_gets(client: httpx.AsyncClient, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = await client.get("/api/v1/namespaces/default")
        response.raise_for_status()
        times.append(time.perf_counter() - started)
    return times


async def compare_latency(
    through: Callable[[bool], httpx.AsyncClient],
    direct: Callable[[bool], httpx.AsyncClient],
    requests: int,
    label: str,
) -> JSON:
    """GET latency of `through` (under `label`) and `direct`, on a new connection each and on
    one kept alive (each client made by its factory given keepalive)."""
    out: JSON = {}
    for keepalive in (False, True):
        async with through(keepalive) as via, direct(keepalive) as straight:
            await timed_gets(via, 5)
            await timed_gets(straight, 5)
            t = ms(await timed_gets(via, requests))
            d = ms(await timed_gets(straight, requests))
        out["kept_alive" if keepalive else "new_connection_each"] = {
            label: t,
            "direct": d,
            "added_p50_ms": round(t["p50_ms"] - d["p50_ms"], 2),
        }
    return out


async def timed_stream(client: httpx.AsyncClient) -> tuple[float, int]:
    started = time.perf_counter()
    size = 0
    async with client.stream("GET", "/api/v1/namespaces/bulk/configmaps") as response:
        response.raise_for_status()
        async for chunk in response.aiter_raw():
            size += len(chunk)
    return time.perf_counter() - started, size


async def seed_bulk(member: EmulatorProcess, mib: int) -> None:
    with contextlib.suppress(KubeError):
        await member.admin.create(
            NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bulk"}},
        )
    filler = "x" * CONFIGMAP_BYTES
    for i in range(mib):
        await member.admin.create(
            CONFIGMAPS,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"bulk-{i}", "namespace": "bulk"},
                "data": {"filler": filler},
            },
            namespace="bulk",
        )


APISERVICES = GVR.of("apiregistration.k8s.io/v1", "apiservices")
SERVICES = GVR.of("v1", "services")
CLUSTER_ROLES = GVR.of("rbac.authorization.k8s.io/v1", "clusterroles")
CLUSTER_ROLE_BINDINGS = GVR.of("rbac.authorization.k8s.io/v1", "clusterrolebindings")
PROXY_PATH = f"/apis/cluster.karmada.io/v1alpha1/clusters/{CLUSTER}/proxy"


async def aggregate(cp: EmulatorProcess, server: KarmadaAggregatedApiserver) -> None:
    """cluster.karmada.io to the aggregated apiserver, as Karmada's artifacts install it."""
    await server.start(cp.client_kubeconfig)
    await cp.admin.create(SERVICES, server.service())
    await cp.admin.create(APISERVICES, server.apiservice())
    for _ in range(600):
        obj = await cp.admin.get(APISERVICES, "v1alpha1.cluster.karmada.io")
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions):
            return
        await asyncio.sleep(0.05)  # poll interval of a wait-for-condition loop
    raise TimeoutError("karmada-aggregated-apiserver did not become Available")


async def allow_impersonation(member: EmulatorProcess, user: str, group: str) -> None:
    """What unified-auth ships for a user of the cluster proxy: the impersonator may act as
    the control plane's admin (its user and group) on the member."""
    name = "karmada-impersonator"
    rules = [
        {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"], "resourceNames": [user]},
        {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["groups"], "resourceNames": [group]},
    ]  # fmt: skip
    await member.admin.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "namespace": "karmada-cluster", "name": name}],
    }
    await member.admin.create(CLUSTER_ROLE_BINDINGS, binding)


async def timed_kubectl(kubeconfig: Path, runs: int, *args: str) -> list[float]:
    """Seconds of each of `runs` kubectl calls (`args`; a GET of default by default)."""
    args = args or ("get", "--raw", "/api/v1/namespaces/default")
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            "kubectl", f"--kubeconfig={kubeconfig}", *args,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"kubectl {args[0]} failed: {err.decode()}")
        times.append(time.perf_counter() - started)
    return times


def with_server(kubeconfig: Path, server: str, path: Path) -> Path:
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = server
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


async def whole_path(
    cp: EmulatorProcess, member: EmulatorProcess, directory: Path, args: argparse.Namespace
) -> JSON:
    """kubectl -> control plane -> aggregated apiserver -> proxy-server -> agent -> member, vs
    the member directly."""
    cp_ca = cp.admin.transport.config.ca_pem
    assert cp_ca is not None
    cp_token = await cp.admin.transport.config.token_source.authorization()  # type: ignore[union-attr]
    member_token = await member.admin.transport.config.token_source.authorization()  # type: ignore[union-attr]
    assert cp_token is not None
    assert member_token is not None
    await allow_impersonation(member, "kubernetes-admin", "system:masters")
    through_url = cp.url + PROXY_PATH
    async with https_client(through_url, cp_ca, cp_token, keepalive=True) as probe:
        await answering(probe, "the whole path")
    out = await compare_latency(
        lambda keepalive: https_client(through_url, cp_ca, cp_token, keepalive=keepalive),
        lambda keepalive: direct_client(member, member_token, keepalive=keepalive),
        args.requests,
        "whole_path",
    )
    through_kc = with_server(cp.admin_kubeconfig, through_url, directory / "through.kubeconfig")
    k_through = ms(await timed_kubectl(through_kc, args.kubectl_runs))
    k_direct = ms(await timed_kubectl(member.admin_kubeconfig, args.kubectl_runs))
    out["kubectl_get_raw"] = {
        "runs": args.kubectl_runs,
        "whole_path": k_through,
        "direct": k_direct,
        "added_p50_ms": round(k_through["p50_ms"] - k_direct["p50_ms"], 2),
    }
    return out


async def metric(agent_metrics: str, name: str) -> float:
    for line in agent_metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


async def run(args: argparse.Namespace) -> JSON:
    if upstream.binary("proxy-server") is None:
        raise SystemExit(
            f"bench.tunnel needs the stock proxy-server: {upstream.missing_reason('proxy-server')}"
        )
    directory = Path(tempfile.mkdtemp(prefix="bench-tunnel-"))
    results: JSON = {}
    missing = upstream.aggregated_apiserver_missing_reason()
    server = None
    if missing is None:
        (directory / "aggregated").mkdir()
        server = KarmadaAggregatedApiserver(directory / "aggregated")
    else:
        results["whole_path"] = {"skipped": missing}
    services = {server.SERVICE_KEY: server.address} if server is not None else {}
    async with (
        emulator_process(
            "karmada", "karmada", directory, client_user=AGENT_USER, services=services
        ) as cp,
        emulator_process("member", "member", directory, client_user=AGENT_USER) as member,
        emulator_process("member", "member-plain", directory, client_user=AGENT_USER) as other,
        contextlib.AsyncExitStack() as stack,
    ):
        if server is not None:
            # Before the agents start: their Clusters are to live in the aggregated apiserver.
            await aggregate(cp, server)
            stack.push_async_callback(server.stop)
        karmada_ca = cp.admin.transport.config.ca_pem
        assert karmada_ca is not None
        server_ca = CertificateAuthority.generate("konnectivity-ca")
        (directory / "server-ca.crt").write_bytes(server_ca.cert_pem)
        server_dir = directory / "proxy-server"
        server_dir.mkdir()
        metrics_port = upstream.free_port()
        async with StockProxyServer(
            server_ca, cluster_ca_pem=karmada_ca, workdir=server_dir
        ) as hub:
            tunnel_flags = (
                f"--tunnel-server-address={hub.agent_address}",
                f"--tunnel-server-ca-file={directory / 'server-ca.crt'}",
                "--tunnel-server-name=localhost",
                f"--tunnel-proxy-url={hub.connect_url}",
                f"--metrics-bind-address=127.0.0.1:{metrics_port}",
                *([f"--tunnel-max-streams={args.max_streams}"] if args.max_streams else []),
            )
            async with (
                agent_process(cp, member, CLUSTER, directory, *tunnel_flags) as tunnelled,
                agent_process(cp, other, OTHER, directory) as plain,
            ):
                cluster = await registered(cp, CLUSTER, tunnel=True)
                await registered(cp, OTHER, tunnel=False)
                spec = cluster["spec"]
                secret = await cp.admin.get(SECRETS, CLUSTER, namespace="karmada-cluster")
                ca_bundle = secret["data"]["caBundle"]
                token = await member.admin.transport.config.token_source.authorization()  # type: ignore[union-attr]
                assert token is not None
                async with tunnel_client(spec, ca_bundle, token, keepalive=True) as probe:
                    await answering(probe, "the tunnel")

                # RSS tunnel off vs on, after registration and a short idle period.
                await asyncio.sleep(5)  # idle before sampling memory, not synchronisation
                results["rss_mib"] = {
                    "tunnel_off": round(rss_mib(plain.pid), 1),
                    "tunnel_on": round(rss_mib(tunnelled.pid), 1),
                }

                # Latency added per request.
                latency = await compare_latency(
                    lambda keepalive: tunnel_client(spec, ca_bundle, token, keepalive=keepalive),
                    lambda keepalive: direct_client(member, token, keepalive=keepalive),
                    args.requests,
                    "tunnel",
                )
                results["latency"] = latency

                # Throughput of one large response.
                await seed_bulk(member, args.stream_mib)
                async with (
                    tunnel_client(spec, ca_bundle, token, keepalive=False) as through,
                    direct_client(member, token, keepalive=False) as direct,
                ):
                    cpu_before = cpu_seconds(tunnelled.pid)
                    t_seconds, size = await timed_stream(through)
                    agent_cpu = cpu_seconds(tunnelled.pid) - cpu_before
                    d_seconds, _ = await timed_stream(direct)
                results["stream"] = {
                    "bytes": size,
                    "tunnel_mib_s": round(size / 2**20 / t_seconds, 1),
                    "direct_mib_s": round(size / 2**20 / d_seconds, 1),
                    "agent_cpu_seconds": round(agent_cpu, 2),
                }

                # RSS per open stream: watches held open through the tunnel (beyond the
                # agent's --tunnel-max-streams, refused with 429), Work delivery meanwhile, and
                # the RSS once they are closed again.
                rss_before = rss_mib(tunnelled.pid)
                watchers = [
                    tunnel_client(spec, ca_bundle, token, keepalive=True)
                    for _ in range(args.streams)
                ]
                streams = []
                for client in watchers:
                    request = client.build_request(
                        "GET", "/api/v1/namespaces", params={"watch": "1", "timeoutSeconds": "300"}
                    )
                    streams.append(await client.send(request, stream=True))
                await asyncio.sleep(2)  # settle before sampling memory, not synchronisation
                rss_open = rss_mib(tunnelled.pid)
                held = sum(1 for response in streams if response.status_code == 200)
                refused = sum(1 for response in streams if response.status_code == 429)
                delivery = await work_delivery_seconds(cp, member)
                for response in streams:
                    await response.aclose()
                for client in watchers:
                    await client.aclose()
                await asyncio.sleep(5)  # settle before sampling memory, not synchronisation
                results["per_stream"] = {
                    "streams": args.streams,
                    "held": held,
                    "refused_429": refused,
                    "rss_before_mib": round(rss_before, 1),
                    "rss_open_mib": round(rss_open, 1),
                    "rss_after_close_mib": round(rss_mib(tunnelled.pid), 1),
                    "kib_per_stream": round((rss_open - rss_before) * 1024 / max(held, 1), 1),
                    "work_delivery_seconds_while_open": delivery,
                }

                if server is not None:
                    results["whole_path"] = await whole_path(cp, member, directory, args)

                # Idle cost.
                async with httpx.AsyncClient() as scrape:
                    url = f"http://127.0.0.1:{metrics_port}/metrics"
                    before = await metric(
                        (await scrape.get(url)).text, "karmada_agent_tunnel_keepalive_pings_total"
                    )
                    cpu_idle = cpu_seconds(tunnelled.pid)
                    await asyncio.sleep(args.idle_seconds)  # the idle period being measured
                    after = await metric(
                        (await scrape.get(url)).text, "karmada_agent_tunnel_keepalive_pings_total"
                    )
                    cpu_idle = cpu_seconds(tunnelled.pid) - cpu_idle
                results["idle"] = {
                    "seconds": args.idle_seconds,
                    "keepalives_per_minute": round((after - before) * 60 / args.idle_seconds, 2),
                    "agent_cpu_seconds": round(cpu_idle, 3),
                }
    results["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    return results


async def work_delivery_seconds(cp: EmulatorProcess, member: EmulatorProcess) -> float:
    """Seconds from a Work's creation to its ConfigMap on the member."""
    name = f"delivered-{int(time.time())}"
    work = control_plane_work(CLUSTER, name, [configmap(name, {"k": "v"})])
    started = time.monotonic()
    await cp.admin.create(WORKS, work, namespace=f"karmada-es-{CLUSTER}")

    async def arrived() -> bool:
        try:
            await member.admin.get(CONFIGMAPS, name, namespace="default")
        except KubeError:
            return False
        return True

    await wait_until(arrived, 60, "the Work's ConfigMap on the member")
    return round(time.monotonic() - started, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--stream-mib", type=int, default=50)
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument(
        "--max-streams", type=int, default=0, help="the agent's --tunnel-max-streams (0: default)"
    )
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--kubectl-runs", type=int, default=20)
    parser.add_argument("--out", default="bench/results/tunnel.json")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args))
    report(results, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
