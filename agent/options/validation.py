"""Validation of the options: every problem is one line that starts with the flag it is about."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from urllib.parse import urlsplit

from agent.kube.leaderelection import JITTER_FACTOR
from agent.options.bind_address import parse_bind_address
from agent.options.controller_selection import CONTROLLERS
from agent.options.durations import format_duration
from agent.options.feature_gates import FEATURE_GATES
from agent.options.formats import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
    host_port_problem,
    label_value_problem,
    secret_key_problem,
    url_problem,
)
from agent.options.model import (
    LEASE_CLUSTERS,
    LOG_FORMATS,
    MIN_TUNNEL_KEEPALIVE,
    REPORT_SECRET_KINDS,
    Options,
)

MAX_CLUSTER_NAME_LENGTH = 48


def validate(options: Options) -> list[str]:
    """All problems with `options`, each naming its flag; empty when the options are usable."""
    problems: list[str] = []

    def check(flag: str, problem: str | None) -> None:
        if problem:
            problems.append(f"--{flag}: {problem}")

    o = options
    if not o.cluster_name:
        check("cluster-name", "is required (the name of this member cluster in Karmada)")
    else:
        check("cluster-name", dns1123_label_problem(o.cluster_name, MAX_CLUSTER_NAME_LENGTH))
    for flag, namespace in (
        ("cluster-namespace", o.cluster_namespace),
        ("leader-elect-resource-namespace", o.leader_elect_resource_namespace),
        ("karmada-kubeconfig-namespace", o.karmada_kubeconfig_namespace),
    ):
        check(flag, dns1123_label_problem(namespace))
    if o.karmada_kubeconfig_secret:
        check("karmada-kubeconfig-secret", dns1123_subdomain_problem(o.karmada_kubeconfig_secret))
    if o.karmada_kubeconfig_secret_key:
        check("karmada-kubeconfig-secret-key", secret_key_problem(o.karmada_kubeconfig_secret_key))
    if o.cluster_api_endpoint:
        endpoint_problem = url_problem(
            o.cluster_api_endpoint, ("https", "http"), "https://10.0.0.1:6443"
        )
        if endpoint_problem is None and urlsplit(o.cluster_api_endpoint).username is not None:
            endpoint_problem = "must not contain user information"
        check("cluster-api-endpoint", endpoint_problem)
    if o.proxy_server_address:
        check(
            "proxy-server-address",
            url_problem(
                o.proxy_server_address, ("http", "https", "socks5"), "socks5://proxy.example:1080"
            ),
        )
    check("cluster-provider", label_value_problem(o.cluster_provider))
    check("cluster-region", label_value_problem(o.cluster_region))
    for zone in o.cluster_zones:
        if not zone:
            check("cluster-zones", "must not contain an empty zone")
        elif problem := label_value_problem(zone):
            check("cluster-zones", f"zone {zone!r} {problem}")
    check("report-secrets", _report_secrets_problem(o.report_secrets))
    if o.tunnel_enabled:
        _check_tunnel(o, check)

    # The values below are accepted by upstream's flag parsing but break its agent at run time;
    # each is listed, with what upstream would do, in REFUSED_WHERE_UPSTREAM_MISBEHAVES.
    check("kube-api-qps", None if o.kube_api_qps > 0 else "must be greater than 0")
    check("kube-api-burst", None if o.kube_api_burst > 0 else "must be greater than 0")
    check(
        "concurrent-work-syncs", None if o.concurrent_work_syncs > 0 else "must be greater than 0"
    )

    zero = timedelta(0)
    for flag, period in (
        ("cluster-status-update-frequency", o.cluster_status_update_frequency),
        ("cluster-lease-duration", o.cluster_lease_duration),
        ("cluster-cache-sync-timeout", o.cluster_cache_sync_timeout),
        ("cert-rotation-checking-interval", o.cert_rotation_checking_interval),
    ):
        check(flag, None if period > zero else "must be greater than 0")
    check(
        "work-deletion-grace-period",
        None if o.work_deletion_grace_period >= zero else "must be greater than or equal to 0",
    )
    for flag, fraction in (
        ("cluster-lease-renew-interval-fraction", o.cluster_lease_renew_interval_fraction),
        ("cert-rotation-remaining-time-threshold", o.cert_rotation_remaining_time_threshold),
    ):
        check(flag, None if 0 < fraction < 1 else "must be greater than 0 and less than 1")

    check(
        "work-deletion-hold-threshold",
        None
        if 0 <= o.work_deletion_hold_threshold <= 1
        else "must be between 0 and 1 (a share of the cluster's Works)",
    )
    if o.leader_elect:
        problems.extend(_leader_election_problems(o))
    check(
        "leader-elect-lease-cluster",
        None
        if o.leader_elect_lease_cluster in LEASE_CLUSTERS
        else f"must be one of {LEASE_CLUSTERS}",
    )

    for flag, address in (
        ("metrics-bind-address", o.metrics_bind_address),
        ("health-probe-bind-address", o.health_probe_bind_address),
        ("profiling-bind-address", o.profiling_bind_address),
    ):
        try:
            parse_bind_address(address)
        except ValueError as exc:
            check(flag, str(exc))
    check("log-format", None if o.log_format in LOG_FORMATS else f"must be one of {LOG_FORMATS}")
    check("controllers", _controllers_problem(o.controllers))
    unknown_gates = sorted(set(o.feature_gates) - set(FEATURE_GATES))
    check(
        "feature-gates", f"unrecognized feature gate: {unknown_gates[0]}" if unknown_gates else None
    )
    return problems


def _check_tunnel(o: Options, check: Callable[[str, str | None], None]) -> None:
    check("tunnel-server-address", host_port_problem(o.tunnel_server_address))
    for flag, value in (
        ("cluster-api-endpoint", o.cluster_api_endpoint),
        ("proxy-server-address", o.proxy_server_address),
    ):
        if value:
            check(flag, "cannot be combined with --tunnel-server-address (the tunnel sets it)")
    if not o.report_kube_impersonator:
        check(
            "report-secrets",
            "must include KubeImpersonator with --tunnel-server-address (the control plane's "
            "cluster proxy authenticates to the member with it)",
        )
    proxy_problem = url_problem(
        o.tunnel_proxy_url, ("http",), "http://karmada-tunnel-connect.karmada-system.svc:8090"
    )
    check(
        "tunnel-proxy-url",
        proxy_problem
        and proxy_problem
        + " (karmada-aggregated-apiserver uses one TLS "
        "configuration for the proxy and the member, so only a plain http CONNECT proxy works)",
    )
    domain_labels = o.tunnel_domain.split(".")
    bad_label = next((x for x in domain_labels if dns1123_label_problem(x)), None)
    if bad_label is not None or len(o.cluster_name) + 1 + len(o.tunnel_domain) > 253:
        check("tunnel-domain", f"{o.tunnel_domain!r} is not a DNS domain (lower-case labels)")
    if o.tunnel_service_account:
        namespace, _, name = o.tunnel_service_account.partition("/")
        if dns1123_label_problem(namespace) or not name or "/" in name:
            check("tunnel-service-account", "must be <namespace>/<name>")
        if o.tunnel_token_file:
            check("tunnel-service-account", "cannot be combined with --tunnel-token-file")
        if not o.tunnel_token_audience:
            check("tunnel-token-audience", "must not be empty with --tunnel-service-account")
    check("tunnel-max-streams", None if o.tunnel_max_streams > 0 else "must be greater than 0")
    if o.tunnel_keepalive_time < MIN_TUNNEL_KEEPALIVE:
        check(
            "tunnel-keepalive-time",
            f"must be at least {format_duration(MIN_TUNNEL_KEEPALIVE)} (the proxy-server "
            "closes connections that ping more often)",
        )


def _report_secrets_problem(kinds: Sequence[str]) -> str | None:
    for kind in kinds:
        if kind not in (*REPORT_SECRET_KINDS, "None"):
            return f"unknown value {kind!r}: use KubeCredentials, KubeImpersonator, both, or None"
    return None


# Values upstream's flag parsing accepts that are refused here, and what upstream's agent would
# do with them (docs/differences-from-upstream.md has the same list).
REFUSED_WHERE_UPSTREAM_MISBEHAVES: Mapping[str, str] = {
    "--cluster-status-update-frequency=0": "the cluster status is reported once at start and "
    "then only when the Cluster's spec changes (a zero requeue means no requeue)",
    "--cluster-lease-duration=0": "the heartbeat Lease is renewed in a loop without pause",
    "--cluster-cache-sync-timeout=0 (or less)": "the member's Node and Pod caches never count "
    "as synced, so the cluster status never has node or resource summaries",
    "--cert-rotation-checking-interval=0 (or less)": "the certificate is checked once at start "
    "and then only when the Cluster's spec changes: it expires unrotated",
    "--cert-rotation-remaining-time-threshold outside (0, 1)": "at 1 or more a new certificate is "
    "requested at every check; at 0 or less only once the certificate has expired",
    "--kube-api-qps=0 (or less), --kube-api-burst=0 (or less)": "every request to the control "
    "plane fails once the first burst is spent (the token bucket never refills)",
    "--concurrent-work-syncs=0 (or less)": "workStatus runs no worker for member-object changes, "
    "so the status of applied objects is never updated",
    "--report-secrets with an unknown value": "the value is ignored, so a misspelt "
    "KubeCredentials silently reports nothing",
    "--controllers with an unknown name": "the name is ignored, so a misspelt -execution "
    "silently leaves the controller running",
    "a namespace flag that is not a DNS-1123 label, a --cluster-api-endpoint, "
    "--proxy-server-address, --cluster-provider, --cluster-region or --cluster-zones value the "
    "Cluster API refuses": "registration or leader election fails at run time instead",
    "an empty zone in --cluster-zones": "spec.zones gets an empty zone name",
}


def _controllers_problem(entries: Sequence[str]) -> str | None:
    for entry in entries:
        name = entry[1:] if entry.startswith("-") else entry
        if entry != "*" and name not in CONTROLLERS:
            return f"unknown controller {entry!r}; known controllers: {', '.join(CONTROLLERS)}"
    return None


def _leader_election_problems(o: Options) -> list[str]:
    problems: list[str] = []
    zero = timedelta(0)
    lease, renew, retry = (
        o.leader_elect_lease_duration,
        o.leader_elect_renew_deadline,
        o.leader_elect_retry_period,
    )
    for flag, value in (
        ("leader-elect-lease-duration", lease),
        ("leader-elect-renew-deadline", renew),
        ("leader-elect-retry-period", retry),
    ):
        if value <= zero:
            problems.append(f"--{flag}: must be greater than 0")
    if problems:
        return problems
    if lease <= renew:
        problems.append(
            "--leader-elect-lease-duration: must be greater than --leader-elect-renew-deadline"
        )
    if renew <= retry * JITTER_FACTOR:
        problems.append(
            "--leader-elect-renew-deadline: must be greater than "
            f"{JITTER_FACTOR} x --leader-elect-retry-period"
        )
    return problems
