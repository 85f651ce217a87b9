"""Emulated API servers for the agent benchmarks, each in a process of its own.

    async with emulator_process("karmada", "karmada", directory, client_user="bench-agent") as cp:
        cp.admin_kubeconfig, cp.client_kubeconfig, cp.port
        await cp.requests()        # what `client_user` asked of it, from /_emulator/requests

A separate process keeps the emulator off the load generator's event loop and CPU accounting,
as a real API server would be. The child (`python -m bench.emulators --profile ...`) writes an
admin kubeconfig and one for `client_user` (client certificate, group system:masters, so the
agent's requests can be told apart), and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.transport import Transport
from emulator.services import service_argument

JSON = dict[str, Any]
START_TIMEOUT = 60.0


@dataclass
class EmulatorProcess:
    name: str
    admin_kubeconfig: Path
    client_kubeconfig: Path
    client_user: str
    url: str
    admin: KubeClient
    pid: int = 0

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 443

    async def requests(self) -> list[JSON]:
        """Rows (verb, resource, subresource or path, count) of `client_user`'s requests."""
        answer = await self.admin.get_json("/_emulator/requests", params={"user": self.client_user})
        return list(answer["items"])


@contextlib.asynccontextmanager
async def emulator_process(
    profile: str,
    name: str,
    directory: Path,
    *,
    client_user: str,
    services: dict[str, str] | None = None,
) -> AsyncIterator[EmulatorProcess]:
    """`services`: "<namespace>/<name>" -> "host:port" of Services the emulator calls (an
    aggregated API server's)."""
    admin_kc = directory / f"{name}-admin.kubeconfig"
    client_kc = directory / f"{name}-{client_user}.kubeconfig"
    log = (directory / f"{name}-emulator.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.emulators", f"--profile={profile}", f"--name={name}",
        f"--admin-kubeconfig={admin_kc}", f"--client-kubeconfig={client_kc}",
        f"--client-user={client_user}",
        *(f"--service={key}={address}" for key, address in (services or {}).items()),
        stdout=log, stderr=log,
    )  # fmt: skip
    admin: KubeClient | None = None
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT
        # The child writes the kubeconfigs only once it serves (the client's one last).
        while not client_kc.exists():
            if process.returncode is not None or loop.time() > deadline:
                raise RuntimeError(f"emulator {name} did not start; see {log.name}")
            await asyncio.sleep(0.05)  # poll interval of a wait-for-condition loop
        config = await load_kubeconfig(str(admin_kc), user_agent="bench")
        admin = KubeClient(Transport(config.with_rate_limits(0, 0)))
        yield EmulatorProcess(
            name, admin_kc, client_kc, client_user, config.host, admin, process.pid
        )
    finally:
        if admin is not None:
            await admin.close()
        if process.returncode is None:
            process.terminate()
            await process.wait()
        log.close()


# --- the child ---------------------------------------------------------------------------------


async def _serve(args: argparse.Namespace) -> int:
    from emulator.emulator import run_emulator

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with run_emulator(args.profile, name=args.name) as emu:
        emu.api.services.update(args.service)
        emu.write_kubeconfig(args.admin_kubeconfig)
        # Written last: its existence tells the parent the server is ready.
        partial = args.client_kubeconfig + ".partial"
        emu.write_kubeconfig(partial, user=args.client_user, groups=["system:masters"])
        os.replace(partial, args.client_kubeconfig)
        print(json.dumps({"name": emu.name, "url": emu.url}), flush=True)
        await stop.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="An emulated API server for the benchmarks.")
    parser.add_argument("--profile", choices=("member", "karmada"), required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--admin-kubeconfig", required=True)
    parser.add_argument("--client-kubeconfig", required=True)
    parser.add_argument("--client-user", required=True)
    parser.add_argument(
        "--service",
        action="append",
        default=[],
        type=service_argument,
        metavar="NAMESPACE/NAME=HOST:PORT",
    )
    return asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
