"""Emulator throughput: simple GETs, PUTs and watch fan-out, in-process and over HTTPS.

    python -m bench.emulator_throughput [--requests 3000] [--concurrency 16]
                                        [--watchers 50] [--writes 200] [--out FILE]

Prints a table and writes the figures as JSON (default bench/results/emulator_throughput.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from emulator.emulator import run_emulator

NAMESPACE = "bench"
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"


@dataclass
class Result:
    scenario: str
    front: str
    operations: int
    seconds: float
    concurrency: int

    @property
    def per_second(self) -> float:
        return self.operations / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "perSecond": round(self.per_second, 1)}


def _configmap(name: str, value: str, rv: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if rv is not None:
        metadata["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"v": value}}


def _check(r: httpx.Response, *ok: int) -> dict[str, Any]:
    if r.status_code not in ok:
        raise RuntimeError(f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text}")
    body: dict[str, Any] = r.json()
    return body


async def _prepare(client: httpx.AsyncClient, names: list[str]) -> dict[str, str]:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    _check(await client.post("/api/v1/namespaces", json=ns), 201, 409)
    rvs = {}
    for name in names:
        r = await client.get(f"{CONFIGMAPS}/{name}")
        if r.status_code == 404:
            r = await client.post(CONFIGMAPS, json=_configmap(name, "0"))
        rvs[name] = _check(r, 200, 201)["metadata"]["resourceVersion"]
    return rvs


async def _run_workers(
    concurrency: int, total: int, work: Callable[[int, int], Awaitable[None]]
) -> float:
    per_worker = total // concurrency

    async def worker(w: int) -> None:
        for i in range(per_worker):
            await work(w, i)

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return time.perf_counter() - start


async def bench_get(client: httpx.AsyncClient, front: str, total: int, conc: int) -> Result:
    names = [f"get-{w}" for w in range(conc)]
    await _prepare(client, names)

    async def work(w: int, _: int) -> None:
        r = await client.get(f"{CONFIGMAPS}/{names[w]}")
        if r.status_code != 200:
            raise RuntimeError(f"GET: {r.status_code} {r.text}")

    seconds = await _run_workers(conc, total, work)
    return Result("GET configmap", front, total // conc * conc, seconds, conc)


async def bench_put(client: httpx.AsyncClient, front: str, total: int, conc: int) -> Result:
    names = [f"put-{w}" for w in range(conc)]
    rvs = await _prepare(client, names)

    async def work(w: int, i: int) -> None:
        name = names[w]
        r = await client.put(f"{CONFIGMAPS}/{name}", json=_configmap(name, str(i), rvs[name]))
        rvs[name] = _check(r, 200)["metadata"]["resourceVersion"]

    seconds = await _run_workers(conc, total, work)
    return Result("PUT configmap", front, total // conc * conc, seconds, conc)


async def bench_watch_fanout(
    make_client: Callable[[int], httpx.AsyncClient],
    front: str,
    watchers: int,
    writes: int,
) -> Result:
    """Time from the first write until every watcher has seen every write."""
    async with make_client(watchers + 4) as client:
        await _prepare(client, [])
        rv = _check(await client.get(CONFIGMAPS), 200)["metadata"]["resourceVersion"]
        seen = [0] * watchers
        streaming = [asyncio.Event() for _ in range(watchers)]
        all_seen = asyncio.Event()
        done_watchers = 0
        prefix = f"fan-{time.monotonic_ns()}-"

        async def watch(i: int) -> None:
            nonlocal done_watchers
            params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "300"}
            async with client.stream("GET", CONFIGMAPS, params=params) as r:
                if r.status_code != 200:
                    raise RuntimeError(f"watch: {r.status_code}")
                streaming[i].set()
                async for line in r.aiter_lines():
                    if not line:
                        continue
                    event = json.loads(line)
                    name = event["object"]["metadata"].get("name", "")
                    if event["type"] == "ADDED" and name.startswith(prefix):
                        seen[i] += 1
                        if seen[i] == writes:
                            done_watchers += 1
                            if done_watchers == watchers:
                                all_seen.set()
                            return

        tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in streaming)), 60)
        start = time.perf_counter()
        for n in range(writes):
            _check(await client.post(CONFIGMAPS, json=_configmap(f"{prefix}{n}", "x")), 201)
        await asyncio.wait_for(all_seen.wait(), 300)
        seconds = time.perf_counter() - start
        await asyncio.gather(*tasks)
    return Result(
        f"watch fan-out ({watchers} watchers x {writes} writes, events delivered)",
        front,
        watchers * writes,
        seconds,
        watchers,
    )


async def run(args: argparse.Namespace) -> list[Result]:
    results: list[Result] = []
    async with run_emulator(args.profile) as emu:
        limits = httpx.Limits(max_connections=args.concurrency + 4)
        async with emu.client(timeout=60) as inproc:
            results.append(await bench_get(inproc, "in-process", args.requests, args.concurrency))
            results.append(await bench_put(inproc, "in-process", args.requests, args.concurrency))
        async with emu.https_client(timeout=60, limits=limits) as https:
            results.append(await bench_get(https, "https", args.requests, args.concurrency))
            results.append(await bench_put(https, "https", args.requests, args.concurrency))
        results.append(
            await bench_watch_fanout(
                lambda n: emu.client(timeout=300), "in-process", args.watchers, args.writes
            )
        )
        results.append(
            await bench_watch_fanout(
                lambda n: emu.https_client(timeout=300, limits=httpx.Limits(max_connections=n)),
                "https",
                args.watchers,
                args.writes,
            )
        )
    return results


def print_table(results: list[Result]) -> None:
    header = f"{'scenario':<62} {'front':<11} {'ops':>7} {'seconds':>8} {'ops/s':>10}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.scenario:<62} {r.front:<11} {r.operations:>7} {r.seconds:>8.3f} "
            f"{r.per_second:>10.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.emulator_throughput")
    parser.add_argument("--profile", choices=("member", "karmada"), default="member")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("bench/results/emulator_throughput.json"))
    args = parser.parse_args(argv)
    results = asyncio.run(run(args))
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "parameters": {
            "requests": args.requests,
            "concurrency": args.concurrency,
            "watchers": args.watchers,
            "writes": args.writes,
            "profile": args.profile,
        },
        "results": [r.to_dict() for r in results],
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
