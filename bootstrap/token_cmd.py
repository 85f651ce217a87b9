"""`karmada-bootstrap token create|list|delete`, run against the Karmada control plane.

`create` also checks what registration needs from the control plane and says plainly what is
missing; `--ensure-prerequisites` creates it, and `--for-cluster NAME` pre-creates the
least-privilege RBAC of that cluster's agent identity (rendered from deploy/), so `register`
never needs upstream's all-powerful rbac-generator identity.
"""

from __future__ import annotations

import asyncio
import base64
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from agent.karmada import names
from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig, ConfigError
from agent.kube.errors import AlreadyExistsError, ApiError, NotFoundError
from agent.kube.resources import CONFIGMAPS, SECRETS
from agent.timefmt import parse_time

from . import PROGRAM, discovery, objects, rbac, render, tokens
from .kubeconfig import anonymous_client_config, load_user_config, open_client

# How long `create` waits for the control plane's bootstrapsigner to sign cluster-info.
SIGNATURE_WAIT = 10.0

Obj = dict[str, Any]


class TokenCommandError(Exception):
    pass


@dataclass
class CreateOptions:
    kubeconfig: str = ""
    karmada_context: str = ""
    ttl: timedelta = timedelta(hours=24)
    usages: list[str] = field(default_factory=lambda: list(tokens.DEFAULT_USAGES))
    groups: list[str] = field(default_factory=lambda: [tokens.DEFAULT_GROUP])
    description: str = ""
    print_register_command: bool = False
    ensure_prerequisites: bool = False
    for_cluster: str = ""
    cluster_namespace: str = names.DEFAULT_CLUSTER_NAMESPACE
    agent_namespace: str = names.DEFAULT_AGENT_NAMESPACE
    signature_wait: float = SIGNATURE_WAIT


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _admin(kubeconfig: str, context: str) -> ClientConfig:
    try:
        return await load_user_config(kubeconfig, context)
    except ConfigError as exc:
        raise TokenCommandError(f"cannot load the Karmada kubeconfig: {exc}") from None


def register_command(config: ClientConfig, token: tokens.BootstrapToken, cluster: str = "") -> str:
    """`karmada-bootstrap register <host:port> --token ... --discovery-token-ca-cert-hash ...`,
    one pin per CA certificate of the kubeconfig's cluster entry."""
    if not config.ca_pem:
        raise TokenCommandError(
            "the kubeconfig's cluster entry has no CA certificate to pin "
            "(certificate-authority or certificate-authority-data)"
        )
    pins = [discovery.spki_pin(c) for c in discovery.split_pem_bundle(config.ca_pem)]
    host = config.host.removeprefix("https://").removeprefix("http://")
    line = (
        f"{PROGRAM} register {host} --token {token} --discovery-token-ca-cert-hash {','.join(pins)}"
    )
    if cluster:
        line += f" --cluster-name {cluster}"
    return line


# --- prerequisites ------------------------------------------------------------------------------


async def _anonymous_can_read_cluster_info(config: ClientConfig) -> str:
    """'' when anonymous GET of cluster-info works, else what is wrong."""
    anonymous = anonymous_client_config(config.host, config.ca_pem)
    async with open_client(anonymous) as client:
        response = await client.raw_get(discovery.CLUSTER_INFO_PATH)
    if response.status == 200:
        data = (response.json() or {}).get("data") or {}
        return "" if "kubeconfig" in data else "kube-public/cluster-info has no 'kubeconfig' key"
    if response.status == 404:
        return "kube-public/cluster-info does not exist"
    return (
        f"anonymous users cannot read kube-public/cluster-info (HTTP {response.status}; needs "
        "--anonymous-auth on karmada-apiserver and the Role/RoleBinding "
        "system:karmada:bootstrap-signer-clusterinfo)"
    )


async def check_prerequisites(
    admin: KubeClient, config: ClientConfig, groups: list[str], token_id: str
) -> list[str]:
    problems = []
    problem = await _anonymous_can_read_cluster_info(config)
    if problem:
        problems.append(problem)
    for req in await rbac.unmet(admin, rbac.bootstrap_requirements(token_id, groups)):
        if req.user == rbac.ANONYMOUS and problem:
            continue
        problems.append(f"not allowed: {req.description} (needs {req.fix})")
    return problems


async def ensure_prerequisites(admin: KubeClient, config: ClientConfig, groups: list[str]) -> None:
    try:
        await admin.get(CONFIGMAPS, rbac.CLUSTER_INFO_NAME, namespace=rbac.CLUSTER_INFO_NAMESPACE)
    except NotFoundError:
        if not config.ca_pem:
            raise TokenCommandError(
                "cannot create cluster-info: the kubeconfig names no CA certificate"
            ) from None
        await admin.create(CONFIGMAPS, rbac.cluster_info_configmap(config.host, config.ca_pem))
        _say(f"created ConfigMap kube-public/cluster-info (server {config.host})")
    for obj in rbac.prerequisite_rbac(groups):
        if not await objects.exists(admin, obj):
            await objects.apply(admin, obj)
            _say(f"created {objects.describe(obj)}")


async def create_cluster_rbac(
    admin: KubeClient, cluster: str, cluster_namespace: str, agent_namespace: str
) -> None:
    for obj in objects.order_for_apply(
        await render.render_control_plane(cluster, cluster_namespace, agent_namespace)
    ):
        await objects.apply(admin, obj)
        _say(f"applied {objects.describe(obj)}")


async def _wait_signed(admin: KubeClient, token_id: str, timeout: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.05
    while True:
        try:
            info = await admin.get(
                CONFIGMAPS, rbac.CLUSTER_INFO_NAME, namespace=rbac.CLUSTER_INFO_NAMESPACE
            )
            if discovery.JWS_PREFIX + token_id in (info.get("data") or {}):
                return True
        except NotFoundError:
            return False
        if loop.time() + delay > deadline:
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def create(o: CreateOptions, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    config = await _admin(o.kubeconfig, o.karmada_context)
    token = tokens.generate()
    try:
        secret = tokens.secret_manifest(
            token,
            ttl=o.ttl,
            usages=tuple(o.usages),
            groups=tuple(o.groups),
            description=o.description,
            now=datetime.now(UTC),
        )
    except tokens.TokenFormatError as exc:
        raise TokenCommandError(str(exc)) from None
    async with open_client(config) as admin:
        if o.ensure_prerequisites:
            await ensure_prerequisites(admin, config, o.groups)
        if o.for_cluster:
            await create_cluster_rbac(admin, o.for_cluster, o.cluster_namespace, o.agent_namespace)
        try:
            await admin.create(SECRETS, secret, namespace=tokens.SECRET_NAMESPACE)
        except AlreadyExistsError:
            raise TokenCommandError(f"bootstrap token {token.id!r} already exists") from None
        problems = await check_prerequisites(admin, config, o.groups, token.id)
        if "signing" in o.usages and not await _wait_signed(admin, token.id, o.signature_wait):
            problems.append(
                f"cluster-info carries no signature for token {token.id!r} after "
                f"{o.signature_wait:g}s: is kube-controller-manager running with the "
                "bootstrapsigner controller (--controllers=...,bootstrapsigner)?"
            )
        if "authentication" not in o.usages:
            problems.append("the token lacks the 'authentication' usage: register cannot use it")
        if not o.for_cluster and not await rbac.rbac_generator_available(admin):
            problems.append(
                "no rbac-generator rights on this control plane (the least-privilege setup): "
                "pre-create each agent's RBAC with `token create --for-cluster NAME`"
            )
    for problem in problems:
        _say(f"WARNING: {problem}")
    if problems and not o.ensure_prerequisites:
        _say("Run again with --ensure-prerequisites to create what is missing.")
    if o.print_register_command:
        print(register_command(config, token, o.for_cluster), file=out)
    else:
        print(token, file=out)


# --- list and delete -------------------------------------------------------------------------


def _data(secret: Obj, key: str) -> str:
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value).decode(errors="replace") if value else ""


def _ttl(expiration: str, now: datetime) -> str:
    if not expiration:
        return "<forever>"
    when = parse_time(expiration)
    if when is None:
        return "<invalid>"
    left = when - now
    if left.total_seconds() <= 0:
        return "<invalid>"
    hours, rest = divmod(int(left.total_seconds()), 3600)
    return f"{hours}h" if hours else f"{rest // 60}m"


async def list_tokens(kubeconfig: str, context: str, out: TextIO | None = None) -> None:
    """One line per token; the secret half is never shown (only `create` prints a token)."""
    out = out or sys.stdout
    config = await _admin(kubeconfig, context)
    async with open_client(config) as admin:
        listed = await admin.list(
            SECRETS,
            namespace=tokens.SECRET_NAMESPACE,
            field_selector=f"type={tokens.SECRET_TYPE}",
        )
    now = datetime.now(UTC)
    rows = [("TOKEN", "TTL", "EXPIRES", "USAGES", "DESCRIPTION", "EXTRA GROUPS")]
    for secret in listed.get("items") or []:
        token_id = _data(secret, tokens.ID_KEY)
        if not token_id:
            continue
        usages = sorted(
            key.removeprefix(tokens.USAGE_PREFIX)
            for key in (secret.get("data") or {})
            if key.startswith(tokens.USAGE_PREFIX) and _data(secret, key) == "true"
        )
        expiration = _data(secret, tokens.EXPIRATION_KEY)
        rows.append(
            (
                f"{token_id}.<hidden>",
                _ttl(expiration, now),
                expiration or "<never>",
                ",".join(usages) or "<none>",
                _data(secret, tokens.DESCRIPTION_KEY) or "<none>",
                _data(secret, tokens.EXTRA_GROUPS_KEY),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(),
            file=out,
        )


async def delete_tokens(
    kubeconfig: str, context: str, ids: list[str], out: TextIO | None = None
) -> None:
    """Delete by id or full token."""
    out = out or sys.stdout
    if not ids:
        raise TokenCommandError("give the id or the full token of at least one bootstrap token")
    token_ids = []
    for value in ids:
        token_id = value.split(".", 1)[0]
        if not tokens.TOKEN_PATTERN.match(f"{token_id}.{'0' * 16}"):
            raise TokenCommandError(
                f"{token_id!r} is not a token id ([a-z0-9]{{6}}) or token ([a-z0-9]{{6}}.[a-z0-9]{{16}})"
            )
        token_ids.append(token_id)
    config = await _admin(kubeconfig, context)
    async with open_client(config) as admin:
        for token_id in token_ids:
            try:
                await admin.delete(
                    SECRETS, tokens.SECRET_PREFIX + token_id, namespace=tokens.SECRET_NAMESPACE
                )
            except NotFoundError:
                raise TokenCommandError(f"bootstrap token {token_id!r} not found") from None
            except ApiError as exc:
                raise TokenCommandError(f"cannot delete token {token_id!r}: {exc}") from None
            print(f"bootstrap token {token_id!r} deleted", file=out)
