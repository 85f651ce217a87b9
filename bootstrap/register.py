"""`karmada-bootstrap register <host:port>`: join this member cluster to Karmada in pull mode.

Order, chosen so that a refusal writes nothing anywhere:
 1. member preflight (refuse when an earlier install exists) and rendering of deploy/;
 2. discovery: untrusted read of cluster-info, JWS check, CA pin, trusted re-read;
 3. the agent's key, made here in memory, and its CSR created with the bootstrap token;
 4. the agent's control-plane RBAC: already there (pre-created by the admin, least privilege),
    or created with upstream's rbac-generator identity when the control plane offers it;
 5. member objects: Namespace, Secret karmada-kubeconfig, ServiceAccount, RBAC, Deployment;
 6. wait until the agent reports the Cluster Ready.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from agent.karmada.names import (
    AGENT_GROUP,
    AGENT_KUBECONFIG_KEY,
    AGENT_KUBECONFIG_SECRET,
    CONDITION_READY,
    DEFAULT_AGENT_NAMESPACE,
    DEFAULT_CLUSTER_NAMESPACE,
    agent_user,
)
from agent.kube.backoff import Backoff
from agent.kube.client import KubeClient
from agent.kube.config import ConfigError
from agent.kube.errors import (
    ApiError,
    ForbiddenError,
    KubeError,
    NotFoundError,
    UnauthorizedError,
)
from agent.kube.resources import (
    CERTIFICATE_SIGNING_REQUESTS,
    DEPLOYMENTS,
    SECRETS,
    SERVICE_ACCOUNTS,
)
from agent.kube.transport import Transport
from agent.resources import CLUSTERS

from . import csr as csrs
from . import discovery, objects, rbac, render, tokens
from .kubeconfig import (
    agent_kubeconfig,
    bootstrap_client_config,
    certificate_client_config,
    current_cluster_entry,
    dump,
    load_user_config,
    open_client,
    server_url,
)
from .waiting import reporting

DEFAULT_CERT_EXPIRATION_SECONDS = 31_536_000
CLUSTER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RBAC_MODES = ("auto", "pre-created", "rbac-generator")

Obj = dict[str, Any]


class RegisterError(Exception):
    """Registration stopped; the message says why and what to check."""


@dataclass
class RegisterOptions:
    endpoint: str
    token: str = ""
    ca_cert_hashes: list[str] = field(default_factory=list)
    unsafe_skip_ca_verification: bool = False
    cluster_name: str = ""
    cluster_namespace: str = DEFAULT_CLUSTER_NAMESPACE
    cluster_provider: str = ""
    cluster_region: str = ""
    cluster_zones: list[str] = field(default_factory=list)
    kubeconfig: str = ""
    context: str = ""
    namespace: str = DEFAULT_AGENT_NAMESPACE
    agent_image: str = ""
    agent_replicas: int = 1
    cert_expiration_seconds: int = DEFAULT_CERT_EXPIRATION_SECONDS
    enable_cert_rotation: bool = False
    discovery_timeout: float = 300.0
    proxy_server_address: str = ""
    tunnel_server_address: str = ""
    tunnel_proxy_url: str = ""
    dry_run: bool = False
    wait_for_ready: bool = True
    control_plane_rbac: str = "auto"


class Progress:
    """Visible progress on stderr; never given secrets."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def __call__(self, message: str) -> None:
        print(f"[register] {message}", file=self.stream or sys.stderr, flush=True)


def _kubeconfig_path(path: str) -> str:
    if path:
        return path
    env = os.environ.get("KUBECONFIG", "")
    return env.split(os.pathsep)[0] if env else os.path.expanduser("~/.kube/config")


def default_cluster_name(kubeconfig: str, context: str) -> str:
    """upstream: the name of the current context's *cluster* entry."""
    try:
        data = yaml.safe_load(Path(_kubeconfig_path(kubeconfig)).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return ""
    return current_cluster_entry(data, context) if isinstance(data, dict) else ""


def validate(o: RegisterOptions) -> list[str]:
    problems = []
    if not o.cluster_name:
        problems.append("--cluster-name is required (no current context to take it from)")
    elif len(o.cluster_name) > 48 or not CLUSTER_NAME.match(o.cluster_name):
        problems.append(
            f"invalid --cluster-name {o.cluster_name!r}: a DNS-1123 label of at most 48 characters"
        )
    if not o.token:
        problems.append("--token is required")
    else:
        try:
            tokens.parse(o.token)
        except tokens.TokenFormatError as exc:
            problems.append(f"--token: {exc}")
    try:
        pins = discovery.parse_pins(o.ca_cert_hashes)
    except discovery.DiscoveryError as exc:
        problems.append(str(exc))
        pins = {"invalid"}
    if not pins and not o.unsafe_skip_ca_verification:
        problems.append(
            "need --discovery-token-ca-cert-hash, or --discovery-token-unsafe-skip-ca-verification"
        )
    if o.agent_replicas < 0:
        problems.append("--karmada-agent-replicas must not be negative")
    if o.control_plane_rbac not in RBAC_MODES:
        problems.append(f"--control-plane-rbac must be one of {', '.join(RBAC_MODES)}")
    if o.tunnel_server_address:
        host, _, port = o.tunnel_server_address.rpartition(":")
        if not host or not port.isdigit():
            problems.append(f"--tunnel-server-address {o.tunnel_server_address!r} is not host:port")
        if o.proxy_server_address:
            problems.append(
                "--proxy-server-address cannot be combined with --tunnel-server-address "
                "(the tunnel sets the Cluster's proxy)"
            )
    elif o.tunnel_proxy_url:
        problems.append("--tunnel-proxy-url needs --tunnel-server-address")
    return problems


def member_params(o: RegisterOptions, member_endpoint: str) -> render.MemberParams:
    """With the tunnel, the agent fills the Cluster's apiEndpoint itself (its route); the
    agent's Karmada client certificate, obtained below, is also its tunnel credential."""
    return render.MemberParams(
        cluster_name=o.cluster_name,
        cluster_namespace=o.cluster_namespace,
        cluster_api_endpoint="" if o.tunnel_server_address else member_endpoint,
        tunnel_server_address=o.tunnel_server_address,
        tunnel_proxy_url=o.tunnel_proxy_url,
        cluster_provider=o.cluster_provider,
        cluster_region=o.cluster_region,
        cluster_zones=tuple(o.cluster_zones),
        proxy_server_address=o.proxy_server_address,
        namespace=o.namespace,
        image=o.agent_image,
        replicas=o.agent_replicas,
        cert_rotation=o.enable_cert_rotation,
    )


def kubeconfig_secret(namespace: str, kubeconfig_text: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": AGENT_KUBECONFIG_SECRET, "namespace": namespace},
        "type": "Opaque",
        "data": {AGENT_KUBECONFIG_KEY: base64.b64encode(kubeconfig_text.encode()).decode()},
    }


async def preflight(member: KubeClient, namespace: str) -> None:
    """As upstream: refuse when an agent install already exists in the namespace."""
    found = []
    for gvr, name, what in (
        (SECRETS, AGENT_KUBECONFIG_SECRET, "Secret"),
        (SERVICE_ACCOUNTS, render.AGENT_SERVICE_ACCOUNT, "ServiceAccount"),
        (DEPLOYMENTS, render.AGENT_NAME, "Deployment"),
    ):
        try:
            await member.get(gvr, name, namespace=namespace)
        except NotFoundError:
            continue
        found.append(f"{what} {namespace}/{name}")
    if found:
        raise RegisterError(
            "this member already has a karmada-agent install: "
            + ", ".join(found)
            + "; run `karmada-bootstrap unregister` first, or choose another -n/--namespace"
        )


def print_dry_run(
    o: RegisterOptions, member_objects: list[Obj], control_plane: list[Obj], out: TextIO
) -> None:
    secret = kubeconfig_secret(o.namespace, "")
    secret_note = (
        "<kubeconfig: server https://"
        f"{o.endpoint}, the pinned CA, and a client certificate for "
        f"CN={agent_user(o.cluster_name)}, O={AGENT_GROUP}>"
    )
    csr_note = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": f"{o.cluster_name}-<random>"},
        "spec": {
            "request": f"<made on this machine: CN={agent_user(o.cluster_name)}, O={AGENT_GROUP}>",
            "signerName": csrs.SIGNER_KUBE_APISERVER_CLIENT,
            "usages": list(csrs.CLIENT_USAGES),
            "expirationSeconds": o.cert_expiration_seconds,
        },
    }
    print("# --- on the Karmada control plane (as the bootstrap token) ---", file=out)
    print(yaml.safe_dump(csr_note, sort_keys=False, explicit_start=True), end="", file=out)
    print(
        "# --- on the Karmada control plane: the agent's RBAC, unless already pre-created ---",
        file=out,
    )
    print(yaml.safe_dump_all(control_plane, sort_keys=False, explicit_start=True), end="", file=out)
    print("# --- on this member cluster ---", file=out)
    secret["data"] = {AGENT_KUBECONFIG_KEY: secret_note}
    ordered = objects.order_for_apply(member_objects)
    print(
        yaml.safe_dump_all(
            [ordered[0], secret, *ordered[1:]], sort_keys=False, explicit_start=True
        ),
        end="",
        file=out,
    )


async def _cluster_exists(client: KubeClient, name: str) -> bool | None:
    """True/False, or None when this identity may not look."""
    try:
        await client.get(CLUSTERS, name)
    except NotFoundError:
        return False
    except ForbiddenError:
        return None
    return True


async def _wait_ready(
    client: KubeClient, o: RegisterOptions, progress: Callable[[str], None]
) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    poll = Backoff(initial=0.1, cap=2.0, jitter=0.0)
    state = "not created yet"
    progress(f"waiting for the agent to report Cluster {o.cluster_name} Ready")
    async with reporting(
        progress, f"the agent to report Cluster {o.cluster_name} Ready", o.discovery_timeout
    ) as waiting:
        while True:
            try:
                cluster = await client.get(CLUSTERS, o.cluster_name)
            except NotFoundError:
                cluster = {}
            conditions = (cluster.get("status") or {}).get("conditions") or []
            if any(
                c.get("type") == CONDITION_READY and c.get("status") == "True" for c in conditions
            ):
                return
            state = "not created yet" if not cluster else "not Ready"
            waiting.detail = f"the Cluster is {state}"
            if loop.time() - start > o.discovery_timeout:
                raise RegisterError(
                    f"Cluster {o.cluster_name} is {state} after {o.discovery_timeout:g}s; check "
                    f"the agent: kubectl -n {o.namespace} get deploy/{render.AGENT_NAME} and "
                    f"kubectl -n {o.namespace} logs deploy/{render.AGENT_NAME}"
                )
            await asyncio.sleep(poll.next())


async def _control_plane_rbac(
    o: RegisterOptions,
    agent: KubeClient,
    bootstrap: KubeClient,
    server: str,
    ca_pem: bytes,
    control_plane_objects: list[Obj],
    progress: Callable[[str], None],
    created: list[tuple[KubeClient, Obj]],
    generator_holder: list[KubeClient],
) -> None:
    missing = await rbac.missing_agent_access(agent, o.cluster_name, o.cluster_namespace)
    if not missing:
        progress("the agent's control-plane RBAC is already in place (pre-created)")
        return
    if o.control_plane_rbac == "pre-created":
        raise RegisterError(
            f"the control plane has not granted {agent_user(o.cluster_name)} its RBAC (missing: "
            + "; ".join(str(m) for m in missing)
            + "). Ask its administrator to run `karmada-bootstrap token create --for-cluster "
            f"{o.cluster_name}`, or `kubectl apply -k deploy/control-plane` with this cluster's name"
        )
    progress("the agent's RBAC is not pre-created; obtaining upstream's rbac-generator identity")
    key = csrs.new_private_key()
    name = f"agent-rbac-generator-{o.cluster_name}{csrs.random_suffix()}"
    cert = await csrs.request_agent_certificate(
        bootstrap,
        name,
        key,
        csrs.Subject(rbac.RBAC_GENERATOR_USER, (AGENT_GROUP,)),
        expiration_seconds=o.cert_expiration_seconds,
        timeout=o.discovery_timeout,
        progress=progress,
    )
    config = certificate_client_config(server, ca_pem, cert, key, source="rbac-generator")
    generator = KubeClient(Transport(config))
    generator_holder.append(generator)
    try:
        exists = await _cluster_exists(generator, o.cluster_name)
        if exists:
            raise RegisterError(f"Cluster {o.cluster_name} already exists on the control plane")
        for obj in objects.order_for_apply(control_plane_objects):
            already = await objects.exists(generator, obj)
            await objects.apply(generator, obj)
            if not already:
                created.append((generator, obj))
    except ForbiddenError as exc:
        raise RegisterError(
            f"the control plane's rbac-generator identity may not create the agent's RBAC "
            f"({exc.message}). This control plane does not offer upstream's all-powerful "
            "generator; ask its administrator to run `karmada-bootstrap token create "
            f"--for-cluster {o.cluster_name}`"
        ) from None
    finally:
        try:
            await generator.delete(CERTIFICATE_SIGNING_REQUESTS, name)
        except KubeError:
            progress(f"could not delete CertificateSigningRequest {name}; the csrcleaner will")
    progress(f"created the agent's control-plane RBAC ({len(control_plane_objects)} objects)")


async def run(
    o: RegisterOptions, *, out: TextIO | None = None, progress: Callable[[str], None] | None = None
) -> None:
    out = out or sys.stdout
    say = progress or Progress()
    if not o.cluster_name:
        o.cluster_name = default_cluster_name(o.kubeconfig, o.context)
    problems = validate(o)
    if problems:
        raise RegisterError("; ".join(problems))
    token = tokens.parse(o.token)
    pins = discovery.parse_pins(o.ca_cert_hashes)

    try:
        member_config = await load_user_config(o.kubeconfig, o.context)
    except ConfigError as exc:
        raise RegisterError(f"cannot load the member cluster's kubeconfig: {exc}") from None
    async with open_client(member_config) as member:
        await preflight(member, o.namespace)
        member_objects = await render.render_member(member_params(o, member_config.host))
        control_plane = await render.render_control_plane(
            o.cluster_name, o.cluster_namespace, o.namespace
        )
        if o.dry_run:
            print_dry_run(o, member_objects, control_plane, out)
            return

        server = server_url(o.endpoint)
        if o.unsafe_skip_ca_verification and not pins:
            say(
                "WARNING: --discovery-token-unsafe-skip-ca-verification: the control plane's CA "
                "is NOT verified; anyone who can intercept this connection can impersonate it"
            )
        info = await discovery.retrieve_validated(
            server,
            token,
            pins,
            unsafe_skip_ca_verification=o.unsafe_skip_ca_verification,
            timeout=o.discovery_timeout,
            progress=say,
        )
        ca_pem = info.ca_pem

        created: list[tuple[KubeClient, Obj]] = []
        generators: list[KubeClient] = []
        async with open_client(bootstrap_client_config(server, ca_pem, token)) as bootstrap:
            key = csrs.new_private_key()
            try:
                async with reporting(
                    say,
                    "the agent's client certificate (a CertificateSigningRequest that Karmada's "
                    "approver approves and the signer signs)",
                    o.discovery_timeout,
                ):
                    cert = await csrs.request_agent_certificate(
                        bootstrap,
                        f"{o.cluster_name}-{csrs.random_suffix()}",
                        key,
                        csrs.Subject(agent_user(o.cluster_name), (AGENT_GROUP,)),
                        expiration_seconds=o.cert_expiration_seconds,
                        timeout=o.discovery_timeout,
                        progress=say,
                    )
            except UnauthorizedError:
                raise RegisterError(
                    "the control plane rejected the bootstrap token: it is unknown, expired, "
                    "or lacks the 'authentication' usage"
                ) from None
            except ForbiddenError as exc:
                raise RegisterError(
                    f"the bootstrap token may not create CertificateSigningRequests ({exc.message});"
                    " the control plane needs the ClusterRoleBinding system:karmada:agent-bootstrap"
                    " (karmada-bootstrap token create --ensure-prerequisites)"
                ) from None
            say(f"certificate issued for {agent_user(o.cluster_name)}")
            agent_config = certificate_client_config(server, ca_pem, cert, key, source="agent")
            async with open_client(agent_config) as agent:
                if await _cluster_exists(agent, o.cluster_name):
                    raise RegisterError(
                        f"Cluster {o.cluster_name} already exists on the control plane; "
                        "unregister it first or choose another --cluster-name"
                    )
                try:
                    await _control_plane_rbac(
                        o, agent, bootstrap, server, ca_pem, control_plane, say, created, generators
                    )
                    kubeconfig_text = dump(
                        agent_kubeconfig(server, ca_pem, o.cluster_name, cert, key)
                    )
                    await _write_member(member, o, member_objects, kubeconfig_text, say)
                except BaseException:
                    for client, obj in reversed(created):
                        try:
                            await objects.delete(client, obj)
                        except KubeError:
                            say(f"could not roll back {objects.describe(obj)}")
                    raise
                finally:
                    for generator in generators:
                        await generator.close()
                if o.wait_for_ready:
                    await _wait_ready(agent, o, say)
    print(f"cluster({o.cluster_name}) is joined successfully", file=out)


async def _write_member(
    member: KubeClient,
    o: RegisterOptions,
    member_objects: list[Obj],
    kubeconfig_text: str,
    say: Callable[[str], None],
) -> None:
    ordered = objects.order_for_apply(member_objects)
    secret = kubeconfig_secret(o.namespace, kubeconfig_text)
    for obj in [ordered[0], secret, *ordered[1:]]:
        try:
            await objects.apply(member, obj)
        except ApiError as exc:
            raise RegisterError(
                f"cannot write {objects.describe(obj)} on the member: {exc}"
            ) from None
        say(f"applied {objects.describe(obj)} on the member")
