"""`python -m emulator --profile member|karmada [--all-crds] --port PORT --kubeconfig-out FILE`

Serves an emulated API server until SIGTERM or SIGINT (then exits 0). The admin
kubeconfig (https server, CA data embedded, bearer token) is written to FILE only once
the server accepts requests, so a script can wait for the file to appear.

Services the emulator calls (admission webhooks configured by a Service reference or by a url
naming the Service's DNS name `https://NAME.NAMESPACE.svc...`, and the backends of APIServices)
are reached at the address `--service NAMESPACE/NAME=HOST:PORT` gives (repeatable; also spelled
`--webhook-service`): the emulator has no cluster network, so e.g.
`--service karmada-system/karmada-webhook=127.0.0.1:8443` lets it call a karmada-webhook running
on this machine (its certificate must still name `karmada-webhook.karmada-system.svc`), and
`--service karmada-system/karmada-aggregated-apiserver=127.0.0.1:7443` lets it proxy
cluster.karmada.io to a karmada-aggregated-apiserver.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from .emulator import run_emulator
from .services import service_argument


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m emulator",
        description="Run an emulated Kubernetes (member) or Karmada API server over HTTPS.",
    )
    parser.add_argument("--profile", choices=("member", "karmada"), default="member")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument(
        "--kubeconfig-out", required=True, help="where to write the admin kubeconfig"
    )
    parser.add_argument("--name", default=None, help="cluster name (member1 / karmada)")
    parser.add_argument(
        "--authorization",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="evaluate RBAC (default) or allow every authenticated request",
    )
    parser.add_argument(
        "--service",
        "--webhook-service",
        dest="service",
        action="append",
        default=[],
        type=service_argument,
        metavar="NAMESPACE/NAME=HOST:PORT",
        help="where a Service (an admission webhook's, an APIService's) is reached (repeatable)",
    )
    parser.add_argument(
        "--all-crds",
        action="store_true",
        help="karmada profile: install every CRD Karmada publishes (policy, work, config, "
        "networking), not only the kinds the agent uses",
    )
    args = parser.parse_args(argv)
    if args.all_crds and args.profile != "karmada":
        parser.error("--all-crds needs --profile karmada")
    return args


async def serve(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with run_emulator(
        args.profile,
        name=args.name,
        port=args.port,
        authorization=args.authorization,
        all_crds=args.all_crds,
    ) as emu:
        emu.api.services.update(args.service)
        # run_emulator yields once /readyz answered over HTTPS.
        emu.write_kubeconfig(args.kubeconfig_out)
        print(f"{args.profile} emulator {emu.name} serving at {emu.url}", flush=True)
        print(f"kubeconfig: {args.kubeconfig_out}", flush=True)
        await stop.wait()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
