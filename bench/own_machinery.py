"""The figures behind docs/architecture.md's "Why our own": what importing the libraries we
did not take costs beside our modules, and the client CPU of a GET through our HTTP/2 client
against httpx's (HTTP/2, over h2 as ours).

    python -m bench.own_machinery [--runs 5] [--requests 2000]

Imports: each module imported in a fresh interpreter after what every agent imports anyway
(its API client), `--runs` times; the least CPU time (time.process_time around the imports,
so a loaded machine inflates it less than wall time) and the least peak RSS (VmHWM), less
those of the API client alone. GETs: an
emulator in a process of its own (bench.emulators), one ConfigMap read `--requests` times,
one at a time, over one HTTP/2 connection; the CPU time of this process (the client only)
per request.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.resources import CONFIGMAPS
from agent.kube.transport import Transport, build_ssl_context

from .emulators import emulator_process

# What every agent imports anyway (its API client, httpx and h2, structlog): the costs below
# are what a module adds to it.
BASE = "agent.kube.client"
# What each of our modules stands in for. (httpx is in the base: the HTTP/2 client is about
# CPU per request, measured below.)
PAIRS = (
    ("informers", "agent.kube.informers", "kubernetes.informer"),
    ("leader election", "agent.kube.leaderelection", "kubernetes.leaderelection.leaderelection"),
    ("kubeconfig loading", "agent.kube.kubeconfig", "kubernetes.config"),
)
# The peak RSS from /proc (VmHWM, KiB): getrusage's ru_maxrss of a child starts from its
# parent's, which has imported all of the agent.
PROBE = (
    "import time\n"
    "t = time.process_time()\n"
    "{statement}\n"
    "cpu = time.process_time() - t\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
    "print(cpu, hwm)\n"
)


def import_cost(module: str | None, runs: int) -> tuple[float, float]:
    """(least CPU seconds, least peak RSS in KiB) of importing the base and `module` (None: the
    base alone)."""
    statement = f"import {BASE}" + (f"; import {module}" if module else "")
    best_cpu, best_rss = float("inf"), float("inf")
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", PROBE.format(statement=statement)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        best_cpu, best_rss = min(best_cpu, float(out[0])), min(best_rss, float(out[1]))
    return best_cpu, best_rss


async def get_cpu(requests: int) -> tuple[float, float]:
    """Client CPU ms per GET: (ours, httpx with http2=True)."""
    with tempfile.TemporaryDirectory() as directory:
        async with emulator_process(
            "member", "member", Path(directory), client_user="bench"
        ) as emu:
            await emu.admin.create(
                CONFIGMAPS, {"metadata": {"name": "probe"}, "data": {"k": "v"}}, namespace="default"
            )
            config = (await load_kubeconfig(str(emu.client_kubeconfig))).with_rate_limits(0, 0)
            path = "/api/v1/namespaces/default/configmaps/probe"

            ours = KubeClient(Transport(config))
            try:
                await ours.get_json(path)  # connected
                started = time.process_time()
                for _ in range(requests):
                    await ours.get_json(path)
                ours_ms = (time.process_time() - started) * 1000 / requests
            finally:
                await ours.close()

            async with httpx.AsyncClient(
                base_url=config.host, http2=True, verify=build_ssl_context(config)
            ) as client:
                (await client.get(path)).raise_for_status()
                started = time.process_time()
                for _ in range(requests):
                    answer = await client.get(path)
                    answer.raise_for_status()
                    answer.json()
                httpx_ms = (time.process_time() - started) * 1000 / requests
                assert answer.http_version == "HTTP/2", answer.http_version
    return ours_ms, httpx_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args(argv)
    base_cpu, base_rss = import_cost(None, args.runs)
    print(f"`{BASE}` alone: {base_cpu * 1000:.0f} ms CPU, {base_rss / 1024:.1f} MiB peak RSS")
    print("| what | ours: import CPU ms, RSS MiB added | the library: the same |")
    print("|---|---:|---:|")
    for what, ours, theirs in PAIRS:
        costs = []
        for module in (ours, theirs):
            cpu, rss = import_cost(module, args.runs)
            added_cpu, added_rss = (cpu - base_cpu) * 1000, (rss - base_rss) / 1024
            costs.append(f"`{module}` +{added_cpu:.0f} ms, +{added_rss:.1f} MiB")
        print(f"| {what} | {costs[0]} | {costs[1]} |")
    ours_ms, httpx_ms = asyncio.run(get_cpu(args.requests))
    print(
        f"\nGET one ConfigMap over HTTP/2, client CPU per request ({args.requests} requests): "
        f"ours {ours_ms:.3f} ms, httpx {httpx_ms:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
