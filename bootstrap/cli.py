"""`karmada-bootstrap`: token create|list|delete, register, unregister (karmadactl's flags).

Flags are read as karmadactl's cobra and pflag read them, by the agent's own pflag parser
(agent/options/pflag_argparse.py): `--flag=value` or `--flag value`, booleans as `--flag` or
`--flag=true|false` (Go's spellings only, no `--no-flag`), string lists comma-separated and
repeatable, durations like `24h`, `5m`, `60s`; errors in pflag's and cobra's words.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from agent.karmada import names
from agent.kube.errors import KubeError
from agent.options.durations import parse_duration
from agent.options.errors import HelpRequested, OptionsError, explain
from agent.options.flag_values import parse_int, parse_string_list
from agent.options.pflag_argparse import ListAction, PflagParser, converter, flag_label

from . import PROGRAM, csr, discovery, register, render, token_cmd, tokens, unregister

EXIT_OK = 0
EXIT_FAILURE = 1


def _flag(
    parser: PflagParser, name: str, default: Any, help_text: str = "", *,
    parse: Callable[[str], Any] = str, short: str = "", dest: str | None = None,
) -> None:  # fmt: skip
    """A pflag value flag: `--name=value` or `--name value`."""
    names = [n for n in (short, name) if n]
    parser.add_argument(
        *names, dest=dest or name[2:].replace("-", "_"), default=default, help=help_text,
        type=converter(parse, flag_label(names)),
    )  # fmt: skip


def _list(
    parser: PflagParser, name: str, default: Sequence[str], help_text: str, **kw: Any
) -> None:
    """A pflag StringSlice: comma-separated, repeatable; the first use replaces the default."""
    parser.add_argument(
        name, default=tuple(default), help=help_text, action=ListAction, metavar="strings",
        type=converter(parse_string_list, name), **kw,
    )  # fmt: skip


def _bool(parser: PflagParser, name: str, default: bool, help_text: str) -> None:
    parser.add_bool(parser, name, dest=name[2:].replace("-", "_"), default=default, help=help_text)


def _rbac_mode(text: str) -> str:
    if text not in register.RBAC_MODES:
        raise ValueError(f"must be one of {', '.join(register.RBAC_MODES)}")
    return text


def _command(commands: Any, name: str, help_text: str) -> PflagParser:
    command: PflagParser = commands.add_parser(name, help=help_text, description=help_text)
    # Arguments are counted after parsing, as cobra does (`accepts 1 arg(s), received 2`).
    command.add_argument("args", nargs="*", help=argparse.SUPPRESS)
    return command


def build_parser() -> PflagParser:
    parser = PflagParser(
        prog=PROGRAM,
        description="Join member clusters to Karmada in pull mode with bootstrap tokens.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    token = commands.add_parser(
        "token",
        help="manage bootstrap tokens on the control plane",
        description="manage bootstrap tokens on the control plane",
    )
    token_commands = token.add_subparsers(dest="token_command", required=True, metavar="COMMAND")
    create = _command(token_commands, "create", "create a bootstrap token")
    listing = _command(token_commands, "list", "list bootstrap tokens (secrets hidden)")
    delete = _command(token_commands, "delete", "delete bootstrap tokens by id or token")
    for sub in (create, listing, delete):
        _flag(sub, "--kubeconfig", "", "kubeconfig of the Karmada control plane")
        _flag(sub, "--karmada-context", "", "context in that kubeconfig")
    _flag(
        create, "--ttl", timedelta(hours=24),
        "lifetime of the token; 0 means never expires (default 24h)", parse=parse_duration,
    )  # fmt: skip
    _list(create, "--usages", tokens.DEFAULT_USAGES, "usages: signing,authentication")
    _list(
        create, "--groups", [tokens.DEFAULT_GROUP],
        "extra groups the token authenticates as",
    )  # fmt: skip
    _flag(create, "--description", "", "a human-friendly description")
    _bool(
        create,
        "--print-register-command",
        False,
        "print the full `karmada-bootstrap register` command instead of the token",
    )
    _bool(
        create,
        "--ensure-prerequisites",
        False,
        "create what registration needs on the control plane (cluster-info, bootstrap RBAC)",
    )
    _flag(
        create,
        "--for-cluster",
        "",
        "also pre-create the least-privilege RBAC of this cluster's agent",
    )
    _flag(
        create, "--cluster-namespace", names.DEFAULT_CLUSTER_NAMESPACE,
        "with --for-cluster: where the agent reports member Secrets",
    )  # fmt: skip
    _flag(
        create, "--agent-namespace", names.DEFAULT_AGENT_NAMESPACE,
        "with --for-cluster: the agent's -n/--namespace (leader election)",
    )  # fmt: skip

    reg = _command(commands, "register", "register this member cluster (pull mode): HOST:PORT")
    _flag(reg, "--token", "", "bootstrap token id.secret")
    _list(
        reg, "--discovery-token-ca-cert-hash", [], "sha256:<hex> pin(s) of the control plane's CA",
        dest="ca_cert_hashes",
    )  # fmt: skip
    _bool(
        reg,
        "--discovery-token-unsafe-skip-ca-verification",
        False,
        "register without pinning the CA (unsafe)",
    )
    _flag(
        reg, "--cluster-name", "",
        "name of this cluster in Karmada (default: current context's cluster)",
    )  # fmt: skip
    _flag(
        reg, "--cluster-namespace", names.DEFAULT_CLUSTER_NAMESPACE,
        "control-plane namespace of the member's reported secrets",
    )  # fmt: skip
    _flag(reg, "--cluster-provider", "")
    _flag(reg, "--cluster-region", "")
    _list(reg, "--cluster-zones", [], "zones of this cluster")
    _flag(reg, "--kubeconfig", "", "kubeconfig of this member cluster")
    _flag(reg, "--context", "", "context in that kubeconfig")
    _flag(
        reg,
        "--namespace",
        names.DEFAULT_AGENT_NAMESPACE,
        "member namespace of the agent",
        short="-n",
    )
    _flag(reg, "--karmada-agent-image", "", "agent image (default: the image in deploy/)")
    _flag(reg, "--karmada-agent-replicas", 1, parse=parse_int)
    _flag(
        reg, "--cert-expiration-seconds", register.DEFAULT_CERT_EXPIRATION_SECONDS,
        "requested lifetime of the agent's certificate", parse=parse_int,
    )  # fmt: skip
    _bool(reg, "--enable-cert-rotation", False, "pass --controllers=*,certRotation to the agent")
    _flag(
        reg, "--discovery-timeout", timedelta(minutes=5),
        "how long to wait for discovery, the certificate and Ready (5m)", parse=parse_duration,
    )  # fmt: skip
    _flag(reg, "--proxy-server-address", "")
    _flag(
        reg,
        "--tunnel-server-address",
        "",
        "host:port of the control plane's tunnel proxy-server (deploy/control-plane/"
        "tunnel-server): the agent keeps a tunnel to it, so the control plane reaches this "
        "cluster without dialling it; authenticated by the agent's own client certificate",
    )
    _flag(
        reg,
        "--tunnel-proxy-url",
        "",
        "the proxy-server's CONNECT address as the control plane reaches it (default: "
        "the karmada-tunnel-connect Service)",
    )
    _bool(reg, "--dry-run", False, "print what would be created; write nothing")
    _bool(reg, "--wait-for-ready", True, "wait until the agent reports the Cluster Ready")
    _flag(
        reg, "--control-plane-rbac", "auto",
        "pre-created (least privilege), rbac-generator (upstream), or auto", parse=_rbac_mode,
    )  # fmt: skip

    unreg = _command(commands, "unregister", "remove a pull-mode member cluster: CLUSTER_NAME")
    _flag(unreg, "--cluster-kubeconfig", "", "kubeconfig of the member")
    _flag(unreg, "--cluster-context", "")
    _flag(
        unreg, "--karmada-config", "",
        "admin kubeconfig of the control plane (else: the agent's own)",
    )  # fmt: skip
    _flag(unreg, "--karmada-context", "")
    _flag(unreg, "--namespace", names.DEFAULT_AGENT_NAMESPACE, short="-n")
    _flag(unreg, "--agent-name", render.AGENT_NAME)
    _flag(unreg, "--cluster-namespace", names.DEFAULT_CLUSTER_NAMESPACE)
    _flag(unreg, "--wait", timedelta(seconds=60), parse=parse_duration)
    _bool(unreg, "--dry-run", False, "print what would be deleted")
    return parser


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """A command line as karmadactl's cobra and pflag read it; raises OptionsError (pflag's and
    cobra's wording) or HelpRequested."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    path = " ".join(
        [PROGRAM, args.command] + ([args.token_command] if args.command == "token" else [])
    )
    if any(arg.startswith("-") and arg != "-" for arg in extra):
        raise OptionsError([parser.unknown_flag(extra)], command=path)
    given = [*args.args, *extra]
    if args.command == "register" and len(given) != 1:
        raise OptionsError([f"accepts 1 arg(s), received {len(given)}"])
    if args.command == "unregister" and len(given) != 1:
        # karmadactl unregister's own wording.
        problem = (
            "invalid cluster name(): must be not empty"
            if not given
            else "only the cluster name is allowed as an argument"
        )
        raise OptionsError([problem])
    if args.command == "token" and args.token_command != "delete" and given:
        raise OptionsError([f'unknown command "{given[0]}" for "{path}"'])
    args.args = given
    return args


async def dispatch(args: argparse.Namespace) -> None:
    if args.command == "token":
        if args.token_command == "create":
            await token_cmd.create(
                token_cmd.CreateOptions(
                    kubeconfig=args.kubeconfig,
                    karmada_context=args.karmada_context,
                    ttl=args.ttl,
                    usages=list(args.usages),
                    groups=list(args.groups),
                    description=args.description,
                    print_register_command=args.print_register_command,
                    ensure_prerequisites=args.ensure_prerequisites,
                    for_cluster=args.for_cluster,
                    cluster_namespace=args.cluster_namespace,
                    agent_namespace=args.agent_namespace,
                )
            )
        elif args.token_command == "list":
            await token_cmd.list_tokens(args.kubeconfig, args.karmada_context)
        else:
            await token_cmd.delete_tokens(args.kubeconfig, args.karmada_context, args.args)
    elif args.command == "register":
        await register.run(
            register.RegisterOptions(
                endpoint=args.args[0],
                token=args.token,
                ca_cert_hashes=list(args.ca_cert_hashes),
                unsafe_skip_ca_verification=args.discovery_token_unsafe_skip_ca_verification,
                cluster_name=args.cluster_name,
                cluster_namespace=args.cluster_namespace,
                cluster_provider=args.cluster_provider,
                cluster_region=args.cluster_region,
                cluster_zones=list(args.cluster_zones),
                kubeconfig=args.kubeconfig,
                context=args.context,
                namespace=args.namespace,
                agent_image=args.karmada_agent_image,
                agent_replicas=args.karmada_agent_replicas,
                cert_expiration_seconds=args.cert_expiration_seconds,
                enable_cert_rotation=args.enable_cert_rotation,
                discovery_timeout=args.discovery_timeout.total_seconds(),
                proxy_server_address=args.proxy_server_address,
                tunnel_server_address=args.tunnel_server_address,
                tunnel_proxy_url=args.tunnel_proxy_url,
                dry_run=args.dry_run,
                wait_for_ready=args.wait_for_ready,
                control_plane_rbac=args.control_plane_rbac,
            )
        )
    else:
        await unregister.run(
            unregister.UnregisterOptions(
                cluster_name=args.args[0],
                cluster_kubeconfig=args.cluster_kubeconfig,
                cluster_context=args.cluster_context,
                karmada_config=args.karmada_config,
                karmada_context=args.karmada_context,
                namespace=args.namespace,
                agent_name=args.agent_name,
                cluster_namespace=args.cluster_namespace,
                wait=args.wait.total_seconds(),
                dry_run=args.dry_run,
            )
        )


_EXPECTED = (
    register.RegisterError,
    unregister.UnregisterError,
    token_cmd.TokenCommandError,
    discovery.DiscoveryError,
    csr.CertificateRequestError,
    render.RenderError,
    KubeError,
)


async def main_async(argv: Sequence[str] | None = None) -> int:
    """The whole command in the running event loop (tests call this directly)."""
    try:
        args = parse_arguments(sys.argv[1:] if argv is None else argv)
    except (HelpRequested, OptionsError) as refused:
        # As karmadactl: no pointer to the help after a wrong count of arguments.
        return explain(
            refused, error="error", usage="See '{command} --help' for usage.", command=""
        )
    try:
        await dispatch(args)
    except _EXPECTED as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return asyncio.run(main_async(argv))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
