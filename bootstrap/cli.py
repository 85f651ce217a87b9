"""`karmada-bootstrap`: token create|list|delete, register, unregister (karmadactl's flags).

Flags follow Go's pflag conventions where karmadactl's do: `--flag=value` or `--flag value`,
booleans as `--flag`, `--flag=true|false`, durations like `24h`, `5m`, `60s`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import timedelta

from agent.karmada import names
from agent.kube.errors import KubeError
from agent.options.durations import parse_duration

from . import PROGRAM, csr, discovery, register, render, token_cmd, tokens, unregister

EXIT_OK = 0
EXIT_FAILURE = 1

_BOOL_FLAGS = {
    "--print-register-command",
    "--ensure-prerequisites",
    "--discovery-token-unsafe-skip-ca-verification",
    "--enable-cert-rotation",
    "--dry-run",
    "--wait-for-ready",
}
_TRUE = {"1", "t", "true", "y", "yes", "on"}
_FALSE = {"0", "f", "false", "n", "no", "off"}


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """`--bool=true|false` (pflag) -> `--bool` / `--no-bool` (argparse)."""
    out = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        if eq and name in _BOOL_FLAGS:
            lowered = value.lower()
            if lowered in _TRUE:
                out.append(name)
                continue
            if lowered in _FALSE:
                out.append("--no-" + name[2:])
                continue
            raise SystemExit(f"{PROGRAM}: invalid boolean {value!r} for {name}")
        out.append(arg)
    return out


def _bool(parser: argparse.ArgumentParser, flag: str, default: bool, help_text: str) -> None:
    parser.add_argument(
        flag, action=argparse.BooleanOptionalAction, default=default, help=help_text
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Join member clusters to Karmada in pull mode with bootstrap tokens.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    token = commands.add_parser("token", help="manage bootstrap tokens on the control plane")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    create = token_commands.add_parser("create", help="create a bootstrap token")
    listing = token_commands.add_parser("list", help="list bootstrap tokens (secrets hidden)")
    delete = token_commands.add_parser("delete", help="delete bootstrap tokens by id or token")
    for sub in (create, listing, delete):
        sub.add_argument("--kubeconfig", default="", help="kubeconfig of the Karmada control plane")
        sub.add_argument("--karmada-context", default="", help="context in that kubeconfig")
    create.add_argument(
        "--ttl",
        type=_duration,
        default=timedelta(hours=24),
        help="lifetime of the token; 0 means never expires (default 24h)",
    )
    create.add_argument(
        "--usages",
        default=",".join(tokens.DEFAULT_USAGES),
        help="comma-separated usages: signing,authentication",
    )
    create.add_argument(
        "--groups",
        default=tokens.DEFAULT_GROUP,
        help="comma-separated extra groups the token authenticates as",
    )
    create.add_argument("--description", default="", help="a human-friendly description")
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
    create.add_argument(
        "--for-cluster",
        default="",
        help="also pre-create the least-privilege RBAC of this cluster's agent",
    )
    create.add_argument(
        "--cluster-namespace",
        default=names.DEFAULT_CLUSTER_NAMESPACE,
        help="with --for-cluster: where the agent reports member Secrets",
    )
    create.add_argument(
        "--agent-namespace",
        default=names.DEFAULT_AGENT_NAMESPACE,
        help="with --for-cluster: the agent's -n/--namespace (leader election)",
    )
    delete.add_argument("tokens", nargs="*", metavar="TOKEN_ID_OR_TOKEN")

    reg = commands.add_parser("register", help="register this member cluster (pull mode)")
    reg.add_argument("endpoint", metavar="HOST:PORT", help="the Karmada API server's address")
    reg.add_argument("--token", default="", help="bootstrap token id.secret")
    reg.add_argument(
        "--discovery-token-ca-cert-hash",
        action="append",
        default=[],
        dest="ca_cert_hashes",
        help="sha256:<hex> pin(s) of the control plane's CA",
    )
    _bool(
        reg,
        "--discovery-token-unsafe-skip-ca-verification",
        False,
        "register without pinning the CA (unsafe)",
    )
    reg.add_argument(
        "--cluster-name",
        default="",
        help="name of this cluster in Karmada (default: current context's cluster)",
    )
    reg.add_argument(
        "--cluster-namespace",
        default=names.DEFAULT_CLUSTER_NAMESPACE,
        help="control-plane namespace of the member's reported secrets",
    )
    reg.add_argument("--cluster-provider", default="")
    reg.add_argument("--cluster-region", default="")
    reg.add_argument("--cluster-zones", default="", help="comma-separated zones")
    reg.add_argument("--kubeconfig", default="", help="kubeconfig of this member cluster")
    reg.add_argument("--context", default="", help="context in that kubeconfig")
    reg.add_argument(
        "-n",
        "--namespace",
        default=names.DEFAULT_AGENT_NAMESPACE,
        help="member namespace of the agent",
    )
    reg.add_argument(
        "--karmada-agent-image", default="", help="agent image (default: the image in deploy/)"
    )
    reg.add_argument("--karmada-agent-replicas", type=int, default=1)
    reg.add_argument(
        "--cert-expiration-seconds",
        type=int,
        default=register.DEFAULT_CERT_EXPIRATION_SECONDS,
        help="requested lifetime of the agent's certificate",
    )
    _bool(reg, "--enable-cert-rotation", False, "pass --controllers=*,certRotation to the agent")
    reg.add_argument(
        "--discovery-timeout",
        type=_duration,
        default=timedelta(minutes=5),
        help="how long to wait for discovery, the certificate and Ready (5m)",
    )
    reg.add_argument("--proxy-server-address", default="")
    reg.add_argument(
        "--tunnel-server-address",
        default="",
        help="host:port of the control plane's tunnel proxy-server (deploy/control-plane/"
        "tunnel-server): the agent keeps a tunnel to it, so the control plane reaches this "
        "cluster without dialling it; authenticated by the agent's own client certificate",
    )
    reg.add_argument(
        "--tunnel-proxy-url",
        default="",
        help="the proxy-server's CONNECT address as the control plane reaches it (default: "
        "the karmada-tunnel-connect Service)",
    )
    _bool(reg, "--dry-run", False, "print what would be created; write nothing")
    _bool(reg, "--wait-for-ready", True, "wait until the agent reports the Cluster Ready")
    reg.add_argument(
        "--control-plane-rbac",
        choices=register.RBAC_MODES,
        default="auto",
        help="pre-created (least privilege), rbac-generator (upstream), or auto",
    )

    unreg = commands.add_parser("unregister", help="remove a pull-mode member cluster")
    unreg.add_argument("cluster_name", metavar="CLUSTER_NAME")
    unreg.add_argument("--cluster-kubeconfig", default="", help="kubeconfig of the member")
    unreg.add_argument("--cluster-context", default="")
    unreg.add_argument(
        "--karmada-config",
        default="",
        help="admin kubeconfig of the control plane (else: the agent's own)",
    )
    unreg.add_argument("--karmada-context", default="")
    unreg.add_argument("-n", "--namespace", default=names.DEFAULT_AGENT_NAMESPACE)
    unreg.add_argument("--agent-name", default=render.AGENT_NAME)
    unreg.add_argument("--cluster-namespace", default=names.DEFAULT_CLUSTER_NAMESPACE)
    unreg.add_argument("--wait", type=_duration, default=timedelta(seconds=60))
    _bool(unreg, "--dry-run", False, "print what would be deleted")
    return parser


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


async def dispatch(args: argparse.Namespace) -> None:
    if args.command == "token":
        if args.token_command == "create":
            await token_cmd.create(
                token_cmd.CreateOptions(
                    kubeconfig=args.kubeconfig,
                    karmada_context=args.karmada_context,
                    ttl=args.ttl,
                    usages=_split(args.usages),
                    groups=_split(args.groups),
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
            await token_cmd.delete_tokens(args.kubeconfig, args.karmada_context, args.tokens)
    elif args.command == "register":
        await register.run(
            register.RegisterOptions(
                endpoint=args.endpoint,
                token=args.token,
                ca_cert_hashes=args.ca_cert_hashes,
                unsafe_skip_ca_verification=args.discovery_token_unsafe_skip_ca_verification,
                cluster_name=args.cluster_name,
                cluster_namespace=args.cluster_namespace,
                cluster_provider=args.cluster_provider,
                cluster_region=args.cluster_region,
                cluster_zones=_split(args.cluster_zones),
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
                cluster_name=args.cluster_name,
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
    args = build_parser().parse_args(normalize_argv(sys.argv[1:] if argv is None else argv))
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
