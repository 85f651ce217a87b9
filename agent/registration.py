"""Registration at start: what every agent replica does before leader election.

1. Cluster id = uid of the member's kube-system Namespace.
2. Refuse to start when another Cluster already uses this name or this id (the same name with the
   same id is this agent restarting, which is fine).
3. When --report-secrets asks for them, create the member-side credentials the control plane may
   use to reach this member (ServiceAccounts, RBAC, service-account token Secrets), labelled
   karmada.io/system=true, and wait for the token controller to fill the tokens.
4. On the control plane: the --cluster-namespace Namespace, the reported Secrets, the Cluster
   (syncMode Pull), then a controller ownerReference from each Secret to the Cluster.

With the tunnel (--tunnel-server-address), the Cluster's apiEndpoint and proxyURL are the tunnel's
route and the proxy-server's CONNECT address, and the Cluster Secret `<cluster>` carries the
tunnel CA as its caBundle (with the member token when KubeCredentials is reported), so the control
plane verifies the route's TLS against it; spec.secretRef names that Secret in either case.

Secret data and tokens are copied between the two API servers as the opaque base64 strings the
API returns; they are never decoded and never logged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from agent.karmada.cluster import cluster_owner_reference
from agent.karmada.names import (
    CLUSTER_API_VERSION,
    IMPERSONATOR_SERVICE_ACCOUNT,
    SYSTEM_LABEL,
    controller_manager_role,
    credentials_service_account,
    system_labels,
)
from agent.kube.client import GVR, KubeClient
from agent.kube.clock import REAL_CLOCK, Clock
from agent.kube.config import ClientConfig
from agent.kube.errors import (
    AlreadyExistsError,
    ConflictError,
    ForbiddenError,
    KubeError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    TransportError,
    UnauthorizedError,
)
from agent.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    NAMESPACES,
    SECRETS,
    SERVICE_ACCOUNTS,
)
from agent.logs import get_logger
from agent.options import Options
from agent.resources import CLUSTERS
from agent.tunnel.route import TunnelPublication

log = get_logger(__name__)

JsonDict = dict[str, Any]
T = TypeVar("T")


SERVICE_ACCOUNT_TOKEN_TYPE = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_ANNOTATION = "kubernetes.io/service-account.name"
# Upstream polls every second for up to 30 s for the token controller to fill data.token.
TOKEN_WAIT_TIMEOUT = 30.0
TOKEN_POLL_INTERVAL = 1.0


class RegistrationError(Exception):
    """Registration cannot go on; the message says what to check. `retriable` when the cause
    may pass by itself (API server unreachable, overloaded or failing)."""

    def __init__(self, message: str, *, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


def impersonator_secret_name(cluster: str) -> str:
    return f"{cluster}-impersonator"


@dataclass(frozen=True)
class MemberCredentials:
    """base64 strings exactly as the member's Secrets hold them."""

    ca_bundle: str | None = None
    token: str | None = None
    impersonator_token: str | None = None

    def __repr__(self) -> str:  # never show tokens
        return (
            f"MemberCredentials(ca_bundle={'set' if self.ca_bundle else None}, "
            f"token={'set' if self.token else None}, "
            f"impersonator_token={'set' if self.impersonator_token else None})"
        )


class TunnelPublisher(Protocol):
    """What the tunnel publishes at registration (agent.tunnel); member-side KubeError when its
    CA cannot be read or created."""

    async def publication(self) -> TunnelPublication: ...


@dataclass(frozen=True)
class RegistrationResult:
    cluster: JsonDict
    cluster_id: str


# --- errors that say what to check ---------------------------------------------------------


def _explain(exc: KubeError, *, side: str, action: str, hint: str) -> RegistrationError:
    if isinstance(exc, TransportError):
        why = f"cannot reach the {side} API server ({exc}); check {hint} and the network"
    elif isinstance(exc, UnauthorizedError):
        why = f"the {side} API server rejected the credentials in {hint} (401 Unauthorized)"
    elif isinstance(exc, ForbiddenError):
        why = f"not allowed ({exc.message}); check the agent's RBAC on the {side} cluster"
    else:
        why = str(exc)
    retriable = isinstance(exc, TransportError | ServerError | TooManyRequestsError)
    return RegistrationError(f"{action}: {why}", retriable=retriable)


# --- member side ---------------------------------------------------------------------------


async def obtain_cluster_id(member: KubeClient, *, hint: str = "--kubeconfig") -> str:
    try:
        namespace = await member.get(NAMESPACES, "kube-system")
    except KubeError as exc:
        raise _explain(
            exc, side="member", action="reading the member's kube-system namespace", hint=hint
        ) from exc
    uid = str((namespace.get("metadata") or {}).get("uid") or "")
    if not uid:
        raise RegistrationError("the member's kube-system namespace has no uid")
    return uid


async def _ensure(client: KubeClient, gvr: GVR, body: JsonDict) -> JsonDict | None:
    """Create unless it exists; the existing object is left alone. Returns the created object."""
    try:
        return await client.create(gvr, body)
    except AlreadyExistsError:
        return None


async def _ensure_namespace(client: KubeClient, name: str) -> None:
    """Make sure the namespace exists, labelled karmada.io/system=true when we may label it.

    Reads first: a least-privilege identity (deploy/components/control-plane-rbac) may get
    its namespaces but not create them, since an administrator created them beforehand."""
    try:
        live = await client.get(NAMESPACES, name)
    except NotFoundError:
        await _ensure(
            client, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name)}
        )
        return
    if ((live.get("metadata") or {}).get("labels") or {}).get(SYSTEM_LABEL) == "true":
        return
    try:
        await client.patch(NAMESPACES, name, {"metadata": {"labels": system_labels()}})
    except ForbiddenError:
        log.info("namespace %s exists without label %s; not allowed to add it", name, SYSTEM_LABEL)


def _meta(name: str, namespace: str | None = None, **extra: Any) -> JsonDict:
    meta: JsonDict = {"name": name, "labels": system_labels()}
    if namespace:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


async def _ensure_service_account_token(
    member: KubeClient,
    namespace: str,
    service_account: str,
    *,
    timeout: float,
    poll_interval: float,
    clock: Clock,
) -> JsonDict:
    """The legacy token Secret named like the ServiceAccount, once its data.token is filled."""
    await _ensure(
        member,
        SERVICE_ACCOUNTS,
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(service_account, namespace),
        },
    )
    await _ensure(
        member,
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": SERVICE_ACCOUNT_TOKEN_TYPE,
            "metadata": _meta(
                service_account,
                namespace,
                annotations={SERVICE_ACCOUNT_NAME_ANNOTATION: service_account},
            ),
        },
    )
    deadline = clock.now() + timeout
    while True:
        secret = await member.get(SECRETS, service_account, namespace=namespace)
        if (secret.get("data") or {}).get("token"):
            return secret
        if clock.now() >= deadline:
            raise RegistrationError(
                f"the token of Secret {namespace}/{service_account} on the member was not filled "
                f"within {timeout:.0f}s: check that the member's kube-controller-manager runs its "
                "service-account token controller"
            )
        await clock.sleep(poll_interval)


async def obtain_member_credentials(
    member: KubeClient,
    options: Options,
    *,
    timeout: float = TOKEN_WAIT_TIMEOUT,
    poll_interval: float = TOKEN_POLL_INTERVAL,
    clock: Clock = REAL_CLOCK,
) -> MemberCredentials:
    cluster, namespace = options.cluster_name, options.cluster_namespace
    try:
        await _ensure_namespace(member, namespace)
        impersonator_token: str | None = None
        if options.report_kube_impersonator:
            secret = await _ensure_service_account_token(
                member,
                namespace,
                IMPERSONATOR_SERVICE_ACCOUNT,
                timeout=timeout,
                poll_interval=poll_interval,
                clock=clock,
            )
            impersonator_token = str(secret["data"]["token"])
        ca_bundle: str | None = None
        token: str | None = None
        if options.report_kube_credentials:
            account = credentials_service_account(cluster)
            role = controller_manager_role(cluster)
            await _ensure(
                member,
                CLUSTER_ROLES,
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": _meta(role),
                    "rules": [
                        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                        {"nonResourceURLs": ["*"], "verbs": ["get"]},
                    ],
                },
            )
            await _ensure(
                member,
                CLUSTER_ROLE_BINDINGS,
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": _meta(role),
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": account, "namespace": namespace}
                    ],
                },
            )
            secret = await _ensure_service_account_token(
                member,
                namespace,
                account,
                timeout=timeout,
                poll_interval=poll_interval,
                clock=clock,
            )
            data = secret.get("data") or {}
            token = str(data["token"])
            ca_bundle = str(data["ca.crt"]) if data.get("ca.crt") else None
    except KubeError as exc:
        raise _explain(
            exc,
            side="member",
            action=f"creating the reported credentials in namespace {namespace} on the member",
            hint="--kubeconfig",
        ) from exc
    return MemberCredentials(
        ca_bundle=ca_bundle, token=token, impersonator_token=impersonator_token
    )


# --- control plane -------------------------------------------------------------------------


def check_unique(clusters: list[JsonDict], name: str, cluster_id: str) -> None:
    """Upstream's rule: fine when a Cluster has both our name and our id; otherwise refuse when
    the name or the id is taken."""
    name_owner: JsonDict | None = None
    id_owner: JsonDict | None = None
    for cluster in clusters:
        cluster_name = str((cluster.get("metadata") or {}).get("name") or "")
        spec_id = str((cluster.get("spec") or {}).get("id") or "")
        if cluster_name == name and spec_id == cluster_id:
            return
        if cluster_name == name:
            name_owner = cluster
        if spec_id == cluster_id:
            id_owner = cluster
    if name_owner is not None:
        other = str((name_owner.get("spec") or {}).get("id") or "") or "<none>"
        raise RegistrationError(
            f"cluster name {name!r} has been registered by another cluster (its id is {other}, "
            f"this member's kube-system uid is {cluster_id}): choose another --cluster-name, or "
            f"delete Cluster {name!r} from Karmada if it is stale"
        )
    if id_owner is not None:
        other_name = str((id_owner.get("metadata") or {}).get("name") or "")
        raise RegistrationError(
            f"this member (cluster id {cluster_id}, the uid of its kube-system namespace) is "
            f"already registered as Cluster {other_name!r}: use --cluster-name={other_name}, or "
            f"unregister Cluster {other_name!r} first"
        )


def desired_cluster_spec(
    options: Options,
    cluster_id: str,
    *,
    member_proxy_url: str | None = None,
    insecure_skip_tls_verification: bool = False,
    tunnel: TunnelPublication | None = None,
) -> JsonDict:
    """The Cluster spec fields this agent owns (upstream generateClusterInControllerPlane)."""
    spec: JsonDict = {"syncMode": "Pull", "id": cluster_id}
    if tunnel is not None:
        spec["apiEndpoint"] = tunnel.api_endpoint
        spec["proxyURL"] = tunnel.proxy_url
        insecure_skip_tls_verification = False  # the route's TLS is verified against caBundle
    else:
        if options.cluster_api_endpoint:
            spec["apiEndpoint"] = options.cluster_api_endpoint
        proxy = member_proxy_url or options.proxy_server_address
        if proxy:
            spec["proxyURL"] = proxy
    if options.cluster_provider:
        spec["provider"] = options.cluster_provider
    if options.cluster_region:
        spec["region"] = options.cluster_region
    if options.cluster_zones:
        spec["zones"] = list(options.cluster_zones)
    if options.report_kube_credentials or tunnel is not None:
        spec["secretRef"] = {
            "namespace": options.cluster_namespace,
            "name": options.cluster_name,
        }
    if options.report_kube_impersonator:
        spec["impersonatorSecretRef"] = {
            "namespace": options.cluster_namespace,
            "name": impersonator_secret_name(options.cluster_name),
        }
    spec["insecureSkipTLSVerification"] = insecure_skip_tls_verification
    return spec


def spec_patch(live_spec: Mapping[str, Any], desired: Mapping[str, Any]) -> JsonDict:
    """Only the owned fields whose value differs ({} when the Cluster is up to date)."""
    patch: JsonDict = {}
    for key, value in desired.items():
        current = live_spec.get(key)
        if key == "insecureSkipTLSVerification":
            current = bool(current)
        if current != value:
            patch[key] = value
    return patch


CLUSTER_UPDATE_ATTEMPTS = 5


async def ensure_cluster(
    karmada: KubeClient, name: str, desired: JsonDict, *, live: JsonDict | None = None
) -> JsonDict:
    """Create the Cluster, or update only the fields we own. `live`: the Cluster as just read
    (listed), which spares reading it again.

    An update (PUT) of the Cluster as read with exactly the differing owned fields changed,
    sent only when something differs and read again on a conflict: taints, resourceModels and
    anything else other writers set on the spec are kept, and no write happens on an ordinary
    restart. `update` is the verb upstream's agent uses and the one this agent's control-plane
    RBAC grants; `karmadactl register`'s RBAC grants neither update nor patch on clusters, so
    there a changed provider, region or zones cannot be written: that is logged as an error
    naming the fields and the missing permission, and the agent runs on with the Cluster as it
    is (upstream's agent exits).
    """
    try:
        if live is None:
            live = await karmada.get(CLUSTERS, name)
    except NotFoundError:
        body = {
            "apiVersion": CLUSTER_API_VERSION,
            "kind": "Cluster",
            "metadata": {"name": name},
            "spec": desired,
        }
        try:
            created = await karmada.create(CLUSTERS, body)
        except AlreadyExistsError:
            live = await karmada.get(CLUSTERS, name)
        else:
            log.info("created Cluster %s", name)
            return created
    for attempt in range(CLUSTER_UPDATE_ATTEMPTS):
        changes = spec_patch(live.get("spec") or {}, desired)
        if not changes:
            return live
        body = {**live, "spec": {**(live.get("spec") or {}), **changes}}
        try:
            updated = await karmada.replace(CLUSTERS, body)
        except ConflictError:
            if attempt + 1 == CLUSTER_UPDATE_ATTEMPTS:
                raise
            live = await karmada.get(CLUSTERS, name)
            continue
        except ForbiddenError as exc:
            log.error(
                "Cluster %s differs from the flags in %s, but this agent may not update it "
                "(%s); running with the Cluster as it is. Grant update on "
                "cluster.karmada.io clusters named %s to the agent's identity, or change the "
                "Cluster on the control plane.",
                name,
                ", ".join(
                    f"spec.{k} ({(live.get('spec') or {}).get(k)!r} -> {v!r})"
                    for k, v in sorted(changes.items())
                ),
                exc.message,
                name,
            )
            return live
        log.info("updated Cluster %s fields %s", name, sorted(changes))
        return updated
    return live  # unreachable: the loop returns or raises


async def _ensure_secret(
    karmada: KubeClient, namespace: str, name: str, data: JsonDict
) -> JsonDict:
    """The Secret with `data`, as it is now. Read first: on a restart it exists, and over a
    slow link a create refused as AlreadyExists is a round trip for nothing."""
    try:
        live = await karmada.get(SECRETS, name, namespace=namespace)
    except NotFoundError:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "data": data,
        }
        try:
            return await karmada.create(SECRETS, body)
        except AlreadyExistsError:
            live = await karmada.get(SECRETS, name, namespace=namespace)
    live_data = live.get("data") or {}
    changed = {k: v for k, v in data.items() if live_data.get(k) != v}
    # Upstream keeps an existing Secret as it is; a rotated member token would then never reach
    # the control plane, so the reported keys are brought up to date.
    if changed:
        return await karmada.patch(SECRETS, name, {"data": changed}, namespace=namespace)
    return live


async def _own_secret(karmada: KubeClient, secret: JsonDict, cluster: JsonDict) -> None:
    owner = cluster_owner_reference(cluster, controller=True)
    meta = secret.get("metadata") or {}
    references = list(meta.get("ownerReferences") or [])
    if any(ref.get("uid") == owner["uid"] for ref in references):
        return
    # A controller reference to another (older) Cluster of the same name would be a second
    # controller, which the API server refuses.
    references = [ref for ref in references if not ref.get("controller")]
    references.append(owner)
    await karmada.patch(
        SECRETS,
        str(meta.get("name")),
        {"metadata": {"ownerReferences": references}},
        namespace=str(meta.get("namespace")),
    )


async def register_in_control_plane(
    karmada: KubeClient,
    options: Options,
    desired_spec: JsonDict,
    credentials: MemberCredentials,
    *,
    hint: str = "--karmada-kubeconfig",
    tunnel: TunnelPublication | None = None,
    listed: JsonDict | None = None,
) -> JsonDict:
    """The namespace, the reported Secrets, the Cluster (`listed`: as just listed, if it
    exists), each Secret owned by the Cluster. Steps that do not depend on each other go at
    once: over a slow link each request is a round trip."""
    cluster, namespace = options.cluster_name, options.cluster_namespace

    async def step(action: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except KubeError as exc:
            raise _explain(exc, side="Karmada", action=action, hint=hint) from exc

    await step(
        f"creating namespace {namespace} on the Karmada control plane",
        _ensure_namespace(karmada, namespace),
    )
    reported: dict[str, JsonDict] = {}
    if options.report_kube_impersonator and credentials.impersonator_token:
        reported[impersonator_secret_name(cluster)] = {"token": credentials.impersonator_token}
    data: dict[str, str] = {}
    if options.report_kube_credentials and credentials.token:
        data["token"] = credentials.token
        if credentials.ca_bundle:
            data["caBundle"] = credentials.ca_bundle
    if tunnel is not None:
        data["caBundle"] = tunnel.ca_bundle  # the control plane verifies the route with it
    if data:
        reported[cluster] = data
    secrets = await asyncio.gather(
        *(
            step(
                f"reporting Secret {namespace}/{name}",
                _ensure_secret(karmada, namespace, name, secret_data),
            )
            for name, secret_data in reported.items()
        )
    )
    cluster_obj = await step(
        f"creating or updating Cluster {cluster}",
        ensure_cluster(karmada, cluster, desired_spec, live=listed),
    )
    await asyncio.gather(
        *(
            step(
                f"setting the owner of Secret {namespace}/{name} to Cluster {cluster}",
                _own_secret(karmada, secret, cluster_obj),
            )
            for name, secret in zip(reported, secrets, strict=True)
        )
    )
    return cluster_obj


async def register(
    karmada: KubeClient,
    member: KubeClient,
    options: Options,
    *,
    member_config: ClientConfig | None = None,
    token_timeout: float = TOKEN_WAIT_TIMEOUT,
    token_poll_interval: float = TOKEN_POLL_INTERVAL,
    tunnel: TunnelPublisher | None = None,
) -> RegistrationResult:
    """The whole start-up registration; raises RegistrationError with what to check."""
    member_hint = f"--kubeconfig ({member_config.source})" if member_config else "--kubeconfig"
    cluster_id = await obtain_cluster_id(member, hint=member_hint)
    try:
        listed = await karmada.list(CLUSTERS)
    except NotFoundError as exc:
        raise RegistrationError(
            "the Karmada API server does not serve cluster.karmada.io/v1alpha1 clusters: check "
            "that --karmada-kubeconfig points at the Karmada API server, not its host cluster"
        ) from exc
    except KubeError as exc:
        raise _explain(
            exc, side="Karmada", action="listing Clusters", hint="--karmada-kubeconfig"
        ) from exc
    clusters = list(listed.get("items") or [])
    check_unique(clusters, options.cluster_name, cluster_id)

    credentials = MemberCredentials()
    if options.report_kube_credentials or options.report_kube_impersonator:
        credentials = await obtain_member_credentials(
            member, options, timeout=token_timeout, poll_interval=token_poll_interval
        )
    publication: TunnelPublication | None = None
    if tunnel is not None:
        try:
            publication = await tunnel.publication()
        except KubeError as exc:
            raise _explain(
                exc, side="member", action="loading the tunnel CA", hint=member_hint
            ) from exc
    desired = desired_cluster_spec(
        options,
        cluster_id,
        member_proxy_url=member_config.proxy_url if member_config else None,
        insecure_skip_tls_verification=bool(member_config and not member_config.verify),
        tunnel=publication,
    )
    cluster = await register_in_control_plane(
        karmada,
        options,
        desired,
        credentials,
        tunnel=publication,
        listed=next(
            (
                # A list's items may come without them (as built-in types' do).
                {"apiVersion": CLUSTER_API_VERSION, "kind": "Cluster", **c}
                for c in clusters
                if (c.get("metadata") or {}).get("name") == options.cluster_name
            ),
            None,
        ),
    )
    log.info("registered cluster %s (id %s)", options.cluster_name, cluster_id)
    return RegistrationResult(cluster=cluster, cluster_id=cluster_id)


__all__ = [
    "MemberCredentials",
    "RegistrationError",
    "RegistrationResult",
    "TunnelPublisher",
    "check_unique",
    "desired_cluster_spec",
    "ensure_cluster",
    "obtain_cluster_id",
    "obtain_member_credentials",
    "register",
    "register_in_control_plane",
    "spec_patch",
]
