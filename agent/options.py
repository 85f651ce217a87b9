"""karmada-agent's command line: upstream flag names, defaults and validation, as an `Options` value.

Flags follow the Go agent (pflag syntax: `--flag=value` and `--flag value`, bools as `--flag` or
`--flag=false`, string lists comma-separated and repeatable, durations like "10s" or "16m40s").
A value upstream accepts is accepted here too, and means what it means upstream (a non-positive
`--cluster-api-qps`, `--rate-limiter-*` or `--concurrent-cluster-syncs` falls back to upstream's
default, `None` among other `--report-secrets` values is ignored). Refused are only the values
with which upstream would fail later or silently misbehave (`REFUSED_WHERE_UPSTREAM_MISBEHAVES`
lists them; docs/differences-from-upstream.md says why for each). Deliberate differences:

- certRotation is on by default (upstream: off). It only acts when the Karmada credential is a
  client certificate; `--controllers=*,-certRotation` turns it off.
- `--log-format`, `--leader-elect-lease-cluster`, `--karmada-kubeconfig-secret`,
  `--karmada-kubeconfig-secret-key` and the outage-safe deletion flags are ours; klog's
  file-logging flags are accepted and ignored (with a warning at start).
"""

from __future__ import annotations

import argparse
import csv
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit

from agent.karmada.names import DEFAULT_AGENT_NAMESPACE, DEFAULT_CLUSTER_NAMESPACE
from agent.kube.leaderelection import JITTER_FACTOR

PROGRAM = "karmada-agent"

# ---------------------------------------------------------------------------------------------
# Go durations: what time.ParseDuration accepts, printed as Duration.String prints.

_NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_DURATION_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")
_MAX_NS = (1 << 63) - 1


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration ("300ms", "1.5h", "2h45m"). Precision below 1 µs is truncated."""
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return timedelta(0)
    if not rest:
        raise ValueError(f"invalid duration {text!r}")
    total = 0
    while rest:
        match = _DURATION_PART.match(rest)
        assert match is not None  # every group may match empty
        whole, fraction, unit = match.groups()
        if not whole and not fraction:
            raise ValueError(f"invalid duration {text!r}")
        if not unit:
            raise ValueError(f"missing unit in duration {text!r}")
        scale = _NS_PER_UNIT.get(unit)
        if scale is None:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        total += int(whole or "0") * scale
        if fraction:
            total += int(fraction) * scale // 10 ** len(fraction)
        if total > _MAX_NS:
            raise ValueError(f"invalid duration {text!r}")
        rest = rest[match.end() :]
    return timedelta(microseconds=(-total if negative else total) // 1000)


def format_duration(value: timedelta) -> str:
    """Go's Duration.String: "0s", "5ms", "1.5s", "5m0s", "16m40s", "1h30m0s"."""
    ns = ((value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds) * 1000
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, scale in (("ms", 1_000_000), ("\u00b5s", 1_000), ("ns", 1)):
            if ns >= scale:
                return sign + _decimal(ns, scale) + unit
    hours, ns = divmod(ns, 3600 * 1_000_000_000)
    minutes, ns = divmod(ns, 60 * 1_000_000_000)
    text = _decimal(ns, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(value: int, scale: int) -> str:
    whole, fraction = divmod(value, scale)
    if not fraction:
        return str(whole)
    return f"{whole}.{str(fraction).rjust(len(str(scale)) - 1, '0').rstrip('0')}"


# ---------------------------------------------------------------------------------------------
# Controllers (--controllers) and feature gates (--feature-gates).

CONTROLLERS = (
    "certRotation",
    "clusterStatus",
    "endpointsliceCollect",
    "execution",
    "serviceExport",
    "workStatus",
)
# Upstream leaves certRotation out of '*'; this agent includes it (see the module docstring).
UPSTREAM_DISABLED_BY_DEFAULT = frozenset({"certRotation"})
DISABLED_BY_DEFAULT: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ControllerSelection:
    """`--controllers` semantics: the first entry naming a controller decides ('foo' on, '-foo' off);
    otherwise '*' turns on every controller that is on by default; without '*' it stays off."""

    entries: tuple[str, ...] = ("*",)

    def explicit(self, name: str) -> bool | None:
        for entry in self.entries:
            if entry == name:
                return True
            if entry == "-" + name:
                return False
        return None

    def is_enabled(self, name: str) -> bool:
        decision = self.explicit(name)
        if decision is not None:
            return decision
        return "*" in self.entries and name not in DISABLED_BY_DEFAULT


@dataclass(frozen=True)
class FeatureGate:
    name: str
    default: bool
    stage: Literal["ALPHA", "BETA"]
    # False: accepted for compatibility with upstream command lines, no effect on this agent.
    affects_agent: bool = False


# The gates karmada-agent registers: karmada's pkg/features DefaultFeatureGates (names, stages
# and defaults as there) plus the AllAlpha/AllBeta switches every Kubernetes gate set has.
FEATURE_GATES: Mapping[str, FeatureGate] = {
    gate.name: gate
    for gate in (
        FeatureGate("AllAlpha", False, "ALPHA"),
        FeatureGate("AllBeta", False, "BETA"),
        FeatureGate("ContextualLogging", True, "BETA"),
        FeatureGate("ControllerPriorityQueue", True, "BETA"),
        FeatureGate("CustomizedClusterResourceModeling", True, "BETA", affects_agent=True),
        FeatureGate("Failover", False, "BETA"),
        FeatureGate("FederatedQuotaEnforcement", False, "ALPHA"),
        FeatureGate("GracefulEviction", True, "BETA"),
        FeatureGate("LoggingAlphaOptions", False, "ALPHA"),
        FeatureGate("LoggingBetaOptions", True, "BETA"),
        FeatureGate("MultiClusterService", False, "ALPHA", affects_agent=True),
        FeatureGate("MultiplePodTemplatesScheduling", False, "ALPHA"),
        FeatureGate("PriorityBasedScheduling", True, "BETA"),
        FeatureGate("PropagateDeps", True, "BETA"),
        FeatureGate("PropagationPolicyPreemption", False, "ALPHA"),
        FeatureGate("ResourceQuotaEstimate", False, "ALPHA"),
        FeatureGate("SchedulingOvercommitProtection", False, "ALPHA"),
        FeatureGate("StatefulFailoverInjection", False, "ALPHA"),
        FeatureGate("WorkloadAffinity", False, "ALPHA"),
    )
}


def resolve_feature_gates(overrides: Mapping[str, bool]) -> dict[str, bool]:
    """Defaults, then AllAlpha/AllBeta for gates not set explicitly, then the explicit settings."""
    resolved = {name: gate.default for name, gate in FEATURE_GATES.items()}
    for stage, switch in (("ALPHA", "AllAlpha"), ("BETA", "AllBeta")):
        if switch in overrides:
            for name, gate in FEATURE_GATES.items():
                if gate.stage == stage and name not in ("AllAlpha", "AllBeta"):
                    resolved[name] = overrides[switch]
    resolved.update(overrides)
    return resolved


REPORT_SECRET_KINDS = ("KubeCredentials", "KubeImpersonator")
# The CONNECT frontend of deploy/control-plane/tunnel-server, as the aggregated apiserver reaches it.
DEFAULT_TUNNEL_PROXY_URL = "http://karmada-tunnel-connect.karmada-system.svc:8090"
# RFC 6761 reserves .invalid never to resolve: the route name is only reachable through the tunnel.
DEFAULT_TUNNEL_DOMAIN = "karmada-tunnel.invalid"
# The stock proxy-server answers pings more frequent than this with GOAWAY (too_many_pings).
MIN_TUNNEL_KEEPALIVE = timedelta(seconds=30)
LOG_FORMATS = ("auto", "json", "console")
# Where the leader-election Lease lives: the Karmada control plane (default: upstream's place, so
# upstream agents and this one elect one leader among them) or the member cluster (reachable while
# the control plane is not).
LEASE_CLUSTERS = ("karmada", "member")
LogFormat = Literal["auto", "json", "console"]


@dataclass(frozen=True)
class BindAddress:
    """A listen address; host "" means every interface, as Go's ":8080" does."""

    host: str
    port: int


def parse_bind_address(value: str) -> BindAddress | None:
    """ "0" disables serving (None); otherwise "host:port", ":port" or "[v6]:port"."""
    if value == "0":
        return None
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"{value!r} is not host:port, :port, or 0 to disable")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"port {port} is out of range")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{value!r}: write IPv6 hosts in brackets, like [::1]:8080")
    return BindAddress(host, port)


# ---------------------------------------------------------------------------------------------
# The options.


@dataclass(frozen=True)
class Options:
    # Registration: what the Cluster object on the control plane says about this member.
    cluster_name: str = ""
    cluster_namespace: str = DEFAULT_CLUSTER_NAMESPACE
    cluster_api_endpoint: str = ""
    proxy_server_address: str = ""
    cluster_provider: str = ""
    cluster_region: str = ""
    cluster_zones: tuple[str, ...] = ()
    report_secrets: tuple[str, ...] = REPORT_SECRET_KINDS
    # Connections.
    karmada_kubeconfig: str = ""
    karmada_context: str = ""
    kubeconfig: str = ""
    kube_api_qps: float = 40.0
    kube_api_burst: int = 60
    cluster_api_qps: float = 40.0
    cluster_api_burst: int = 60
    # Status, heartbeat, modeling.
    cluster_status_update_frequency: timedelta = timedelta(seconds=10)
    cluster_lease_duration: timedelta = timedelta(seconds=40)
    cluster_lease_renew_interval_fraction: float = 0.25
    cluster_success_threshold: timedelta = timedelta(seconds=30)
    cluster_failure_threshold: timedelta = timedelta(seconds=30)
    cluster_cache_sync_timeout: timedelta = timedelta(seconds=120)
    enable_cluster_resource_modeling: bool = True
    # Controllers, concurrency, work queues.
    controllers: tuple[str, ...] = ("*",)
    concurrent_cluster_syncs: int = 5
    concurrent_work_syncs: int = 5
    resync_period: timedelta = timedelta(seconds=0)
    rate_limiter_base_delay: timedelta = timedelta(seconds=0.005)
    rate_limiter_max_delay: timedelta = timedelta(seconds=1000)
    rate_limiter_qps: int = 10
    rate_limiter_bucket_size: int = 100
    # Outage-safe deletion (ours): see agent.controllers.execution.deletion_guard.
    work_deletion_grace_period: timedelta = timedelta(minutes=10)
    work_deletion_hold_threshold: float = 0.5
    # Objects a Work adopted (overwrite) are released with it unless this restores upstream's
    # deletion (ours; agent.controllers.execution.deletion).
    delete_adopted_resources: bool = False
    feature_gates: Mapping[str, bool] = field(default_factory=lambda: resolve_feature_gates({}))
    # Leader election (a Lease on the control plane as upstream, or on the member).
    leader_elect: bool = True
    leader_elect_lease_cluster: str = "karmada"
    leader_elect_resource_namespace: str = DEFAULT_AGENT_NAMESPACE
    leader_elect_lease_duration: timedelta = timedelta(seconds=15)
    leader_elect_renew_deadline: timedelta = timedelta(seconds=10)
    leader_elect_retry_period: timedelta = timedelta(seconds=2)
    # Certificate rotation.
    cert_rotation_checking_interval: timedelta = timedelta(seconds=300)
    cert_rotation_remaining_time_threshold: float = 0.2
    karmada_kubeconfig_namespace: str = DEFAULT_AGENT_NAMESPACE
    karmada_kubeconfig_secret: str = ""
    karmada_kubeconfig_secret_key: str = ""
    # Serving.
    metrics_bind_address: str = ":8080"
    health_probe_bind_address: str = ":10357"
    enable_pprof: bool = False
    profiling_bind_address: str = ":6060"
    # The tunnel (ours, off by default): the control plane reaches this cluster through the
    # agent's own connection to a konnectivity proxy-server (agent.tunnel).
    tunnel_server_address: str = ""
    tunnel_server_name: str = ""
    tunnel_server_ca_file: str = ""
    tunnel_token_file: str = ""
    tunnel_proxy_url: str = DEFAULT_TUNNEL_PROXY_URL
    tunnel_domain: str = DEFAULT_TUNNEL_DOMAIN
    tunnel_keepalive_time: timedelta = timedelta(seconds=40)
    # Logging.
    verbosity: int = 0
    log_format: LogFormat = "auto"
    # klog flags that were given and are ignored by this agent (for a warning at start).
    ignored_flags: tuple[str, ...] = ()

    @property
    def controller_selection(self) -> ControllerSelection:
        return ControllerSelection(self.controllers)

    def controller_enabled(self, name: str) -> bool:
        """Whether to start controller `name`; endpointsliceCollect also needs MultiClusterService."""
        if name not in CONTROLLERS:
            raise KeyError(name)
        if name == "endpointsliceCollect" and not self.feature_gates["MultiClusterService"]:
            return False
        return self.controller_selection.is_enabled(name)

    def enabled_controllers(self) -> frozenset[str]:
        return frozenset(name for name in CONTROLLERS if self.controller_enabled(name))

    @property
    def cert_rotation_requested(self) -> bool:
        """True when the command line names certRotation itself (warn if there is no certificate)."""
        return self.controller_selection.explicit("certRotation") is True

    def gate(self, name: str) -> bool:
        return self.feature_gates[name]

    @property
    def report_kube_credentials(self) -> bool:
        return "KubeCredentials" in self.report_secrets

    @property
    def report_kube_impersonator(self) -> bool:
        return "KubeImpersonator" in self.report_secrets

    @property
    def cluster_lease_renew_interval(self) -> timedelta:
        return self.cluster_lease_duration * self.cluster_lease_renew_interval_fraction

    @property
    def tunnel_enabled(self) -> bool:
        return bool(self.tunnel_server_address)

    @property
    def metrics_bind(self) -> BindAddress | None:
        return parse_bind_address(self.metrics_bind_address)

    @property
    def health_probe_bind(self) -> BindAddress | None:
        return parse_bind_address(self.health_probe_bind_address)


# ---------------------------------------------------------------------------------------------
# Validation. Every problem is one line that starts with the flag it is about.

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
MAX_CLUSTER_NAME_LENGTH = 48


def _dns1123_label_problem(value: str, max_length: int = 63) -> str | None:
    if len(value) > max_length:
        return f"must be no more than {max_length} characters"
    if not _DNS1123_LABEL.fullmatch(value):
        return (
            "must be a DNS-1123 label: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return None


_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


def _dns1123_subdomain_problem(value: str) -> str | None:
    if len(value) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(value):
        return "must be a valid object name (DNS-1123 subdomain)"
    return None


def _label_value_problem(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _LABEL_VALUE.fullmatch(value):
        return (
            "must be a valid label value: letters, digits, '-', '_' and '.', "
            "starting and ending with a letter or digit"
        )
    return None


def _url_problem(value: str, schemes: Iterable[str], example: str) -> str | None:
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises on a malformed port
    except ValueError as exc:
        return f"{value!r} is not a valid URL ({exc})"
    allowed = tuple(schemes)
    if parts.scheme not in allowed:
        return f"{value!r} must be a URL with scheme {' or '.join(allowed)}, like {example}"
    if not parts.hostname:
        return f"{value!r} has no host"
    if parts.query or parts.fragment:
        return f"{value!r} must not have a query or fragment"
    return None


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
        check("cluster-name", _dns1123_label_problem(o.cluster_name, MAX_CLUSTER_NAME_LENGTH))
    for flag, namespace in (
        ("cluster-namespace", o.cluster_namespace),
        ("leader-elect-resource-namespace", o.leader_elect_resource_namespace),
        ("karmada-kubeconfig-namespace", o.karmada_kubeconfig_namespace),
    ):
        check(flag, _dns1123_label_problem(namespace))
    if o.karmada_kubeconfig_secret:
        check("karmada-kubeconfig-secret", _dns1123_subdomain_problem(o.karmada_kubeconfig_secret))
    if o.karmada_kubeconfig_secret_key and not _SECRET_KEY.fullmatch(
        o.karmada_kubeconfig_secret_key
    ):
        check(
            "karmada-kubeconfig-secret-key",
            "must consist of letters, digits, '-', '_' or '.' (a Secret data key)",
        )
    if o.cluster_api_endpoint:
        endpoint_problem = _url_problem(
            o.cluster_api_endpoint, ("https", "http"), "https://10.0.0.1:6443"
        )
        if endpoint_problem is None and urlsplit(o.cluster_api_endpoint).username is not None:
            endpoint_problem = "must not contain user information"
        check("cluster-api-endpoint", endpoint_problem)
    if o.proxy_server_address:
        check(
            "proxy-server-address",
            _url_problem(
                o.proxy_server_address, ("http", "https", "socks5"), "socks5://proxy.example:1080"
            ),
        )
    check("cluster-provider", _label_value_problem(o.cluster_provider))
    check("cluster-region", _label_value_problem(o.cluster_region))
    for zone in o.cluster_zones:
        if not zone:
            check("cluster-zones", "must not contain an empty zone")
        elif problem := _label_value_problem(zone):
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


def _host_port_problem(value: str) -> str | None:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"{value!r} is not host:port"
    return None


def _check_tunnel(o: Options, check: Callable[[str, str | None], None]) -> None:
    check("tunnel-server-address", _host_port_problem(o.tunnel_server_address))
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
    proxy_problem = _url_problem(
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
    bad_label = next((x for x in domain_labels if _dns1123_label_problem(x)), None)
    if bad_label is not None or len(o.cluster_name) + 1 + len(o.tunnel_domain) > 253:
        check("tunnel-domain", f"{o.tunnel_domain!r} is not a DNS domain (lower-case labels)")
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


def _apply_upstream_fallbacks(values: dict[str, Any]) -> dict[str, Any]:
    """Where upstream's agent replaces a non-positive value by a default, so do we: the member
    client's rate limits (40 QPS, burst 60), the work queues' rate limiter (5ms, 1000s, 10, 100)
    and controller-runtime's one worker for --concurrent-cluster-syncs. Negative resync periods,
    thresholds and verbosity behave as 0 there, and are made 0 here."""
    defaults = Options()
    zero = timedelta(0)
    for name in (
        "cluster_api_qps",
        "cluster_api_burst",
        "rate_limiter_base_delay",
        "rate_limiter_max_delay",
        "rate_limiter_qps",
        "rate_limiter_bucket_size",
    ):
        value = values.get(name)
        if value is not None and value <= (zero if isinstance(value, timedelta) else 0):
            values[name] = getattr(defaults, name)
    if values.get("concurrent_cluster_syncs", 1) <= 0:
        values["concurrent_cluster_syncs"] = 1
    for name in ("resync_period", "cluster_success_threshold", "cluster_failure_threshold"):
        if values.get(name, zero) < zero:
            values[name] = zero
    if values.get("verbosity", 0) < 0:
        values["verbosity"] = 0
    return values


def start_warnings(options: Options) -> list[str]:
    """What the agent says once at start about flags it accepts but cannot apply as upstream."""
    warnings: list[str] = []
    defaults = Options()
    if options.ignored_flags:
        warnings.append(
            "ignoring klog flags this agent does not use: " + ", ".join(options.ignored_flags)
        )
    if options.enable_pprof or options.profiling_bind_address != defaults.profiling_bind_address:
        warnings.append(
            "--enable-pprof and --profiling-bind-address have no effect: this agent has no pprof "
            "endpoint"
        )
    if options.concurrent_cluster_syncs != defaults.concurrent_cluster_syncs:
        warnings.append(
            f"--concurrent-cluster-syncs={options.concurrent_cluster_syncs} has no effect: the "
            "agent syncs one Cluster, its own, one pass at a time (as upstream's agent does "
            "whatever the value)"
        )
    if options.resync_period > timedelta(0):
        warnings.append(
            f"--resync-period={format_duration(options.resync_period)} has no effect: the "
            "agent's watches deliver every change, and drift and health flow from them"
        )
    if "None" in options.report_secrets and len(options.report_secrets) > 1:
        warnings.append(
            "--report-secrets: 'None' is ignored next to other values (as upstream does); "
            f"reporting {', '.join(k for k in options.report_secrets if k != 'None')}"
        )
    return warnings


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


# ---------------------------------------------------------------------------------------------
# Parsing. argparse, taught pflag's syntax.


class OptionsError(ValueError):
    """Bad command line: one or more problems, each naming its flag."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


class HelpRequested(Exception):  # noqa: N818 - a signal, not an error
    def __init__(self, text: str) -> None:
        self.text = text
        super().__init__(text)


_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_go_bool(text: str) -> bool:
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise ValueError(f"invalid boolean {text!r} (use true or false)")


def _parse_int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise ValueError(f"invalid integer {text!r}") from None


def _parse_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"invalid number {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"invalid number {text!r}")
    return value


def _parse_list(text: str) -> list[str]:
    """pflag string slices are one CSV record; an empty value is an empty list."""
    if not text:
        return []
    return [item.strip() for item in next(csv.reader([text]))]


def parse_feature_gates(text: str) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for item in _parse_list(text):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"missing bool value for {name}")
        if name not in FEATURE_GATES:
            raise ValueError(f"unrecognized feature gate: {name}")
        try:
            gates[name] = parse_go_bool(value.strip())
        except ValueError:
            raise ValueError(f"invalid value of {name}={value.strip()}, err: not a bool") from None
    return gates


def _converter(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


class _ListAction(argparse.Action):
    """pflag StringSlice: the first use replaces the default, later uses append."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        seen: set[str] = namespace.__dict__.setdefault("_lists_seen", set())
        current = list(getattr(namespace, self.dest)) if self.dest in seen else []
        seen.add(self.dest)
        setattr(namespace, self.dest, tuple(current + list(values)))


class _GatesAction(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        merged = dict(getattr(namespace, self.dest) or {})
        merged.update(values)
        setattr(namespace, self.dest, merged)


class _IgnoredAction(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        ignored = list(getattr(namespace, "ignored_flags", ()))
        ignored.append(self.option_strings[0])
        namespace.ignored_flags = tuple(ignored)
        if self.dest == "logging_format" and values == "json":
            namespace.log_format = "json"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            extra = message.removeprefix("unrecognized arguments: ").split()
            flag = next((arg for arg in extra if arg.startswith("-")), None)
            if flag is not None:
                message = f"unknown flag: {flag.partition('=')[0]}"
            else:
                message = f"{PROGRAM} takes no arguments, got {extra[0]!r}"
        elif message.startswith("argument "):
            # "argument --x/-y: detail" -> "--x: detail", naming the long flag.
            names, _, detail = message.removeprefix("argument ").partition(": ")
            long_names = [n for n in names.split("/") if n.startswith("--")]
            message = f"{(long_names or [names])[0]}: {detail}"
        raise OptionsError([message])


class _HelpAction(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        raise HelpRequested(parser.format_help())


class _HelpFormatter(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=44, width=100)


Kind = Literal["str", "bool", "int", "float", "duration", "list", "gates"]


@dataclass(frozen=True)
class _Flag:
    name: str
    kind: Kind
    group: str
    help: str
    dest: str = ""
    short: str = ""

    @property
    def attribute(self) -> str:
        return self.dest or self.name.replace("-", "_")


_REGISTRATION = "Registration"
_CONNECTIONS = "Connections"
_STATUS = "Cluster status and heartbeat"
_CONTROLLERS = "Controllers and work queues"
_LEADER = "Leader election (a Lease on the member cluster, or on the Karmada control plane)"
_ROTATION = "Certificate rotation"
_TUNNEL = "Tunnel (the control plane reaches this cluster through the agent's connection)"
_SERVING = "Serving"
_LOGGING = "Logging"

_CONTROLLERS_HELP = (
    "Controllers to run: '*' runs all on-by-default ones, 'foo' enables foo, '-foo' disables it. "
    f"Controllers: {', '.join(CONTROLLERS)}. certRotation is on by default here (upstream: off) "
    "and acts only when the Karmada credential is a client certificate."
)
_GATES_HELP = (
    "Comma-separated Name=true|false pairs. Gates: "
    + ", ".join(
        f"{g.name} ({g.stage}, default {str(g.default).lower()})" for g in FEATURE_GATES.values()
    )
    + ". Only "
    + ", ".join(g.name for g in FEATURE_GATES.values() if g.affects_agent)
    + " change this agent; the others are accepted for compatibility."
)

# fmt: off
FLAGS: tuple[_Flag, ...] = (
    _Flag("cluster-name", "str", _REGISTRATION,
          "Name of the member cluster this agent serves (required)."),
    _Flag("cluster-namespace", "str", _REGISTRATION,
          "Namespace on the control plane for this cluster's reported secrets."),
    _Flag("cluster-api-endpoint", "str", _REGISTRATION,
          "API endpoint of this member cluster, written to the Cluster's spec.apiEndpoint."),
    _Flag("proxy-server-address", "str", _REGISTRATION,
          "Proxy (http, https or socks5 URL) through which the control plane reaches this "
          "cluster; spec.proxyURL."),
    _Flag("cluster-provider", "str", _REGISTRATION,
          "Provider of this cluster, for spreading workloads across providers."),
    _Flag("cluster-region", "str", _REGISTRATION,
          "Region of this cluster, for spreading workloads across regions."),
    _Flag("cluster-zones", "list", _REGISTRATION,
          "Zones of this cluster (comma-separated), for spreading workloads across zones."),
    _Flag("report-secrets", "list", _REGISTRATION,
          "Secrets to report to the control plane at registration: KubeCredentials, "
          "KubeImpersonator, both, or None."),
    _Flag("karmada-kubeconfig", "str", _CONNECTIONS,
          "Path to the kubeconfig of the Karmada control plane."),
    _Flag("karmada-context", "str", _CONNECTIONS,
          "Context to use in --karmada-kubeconfig (default: its current context)."),
    _Flag("kubeconfig", "str", _CONNECTIONS,
          "Path to a kubeconfig of the member cluster; only needed outside the cluster."),
    _Flag("kube-api-qps", "float", _CONNECTIONS,
          "Client-side QPS limit towards the Karmada API server."),
    _Flag("kube-api-burst", "int", _CONNECTIONS,
          "Client-side burst towards the Karmada API server."),
    _Flag("cluster-api-qps", "float", _CONNECTIONS,
          "Client-side QPS limit towards the member cluster's API server."),
    _Flag("cluster-api-burst", "int", _CONNECTIONS,
          "Client-side burst towards the member cluster's API server."),
    _Flag("cluster-status-update-frequency", "duration", _STATUS,
          "How often the cluster status is computed and reported; keep it in step with the "
          "controller manager's --cluster-monitor-grace-period."),
    _Flag("cluster-lease-duration", "duration", _STATUS,
          "Lifetime of the cluster heartbeat Lease."),
    _Flag("cluster-lease-renew-interval-fraction", "float", _STATUS,
          "The heartbeat Lease is renewed every lease duration times this fraction (between 0 "
          "and 1)."),
    _Flag("cluster-success-threshold", "duration", _STATUS,
          "How long health checks must succeed before the cluster is reported Ready again."),
    _Flag("cluster-failure-threshold", "duration", _STATUS,
          "How long health checks must fail before the cluster is reported not Ready."),
    _Flag("cluster-cache-sync-timeout", "duration", _STATUS,
          "How long to wait for caches to fill."),
    _Flag("enable-cluster-resource-modeling", "bool", _STATUS,
          "Build resource models (allocatable modelings) from the member's Nodes and Pods."),
    _Flag("controllers", "list", _CONTROLLERS,
          _CONTROLLERS_HELP),
    _Flag("concurrent-cluster-syncs", "int", _CONTROLLERS,
          "Number of Clusters synced concurrently."),
    _Flag("concurrent-work-syncs", "int", _CONTROLLERS,
          "Number of Works synced concurrently."),
    _Flag("resync-period", "duration", _CONTROLLERS,
          "Base period of informer resyncs; 0 disables them."),
    _Flag("rate-limiter-base-delay", "duration", _CONTROLLERS,
          "Base delay of the per-item exponential retry backoff."),
    _Flag("rate-limiter-max-delay", "duration", _CONTROLLERS,
          "Maximum delay of the per-item exponential retry backoff."),
    _Flag("rate-limiter-qps", "int", _CONTROLLERS,
          "Refill rate of the work queues' shared token bucket."),
    _Flag("rate-limiter-bucket-size", "int", _CONTROLLERS,
          "Size of the work queues' shared token bucket."),
    _Flag("work-deletion-grace-period", "duration", _CONTROLLERS,
          "After the control plane was out of reach for longer than --cluster-lease-duration, "
          "Work deletions seen in the first window after it answers again are held this long "
          "when they are a large share of this cluster's Works (see "
          "--work-deletion-hold-threshold); 0 deletes at once, as upstream. Not an upstream "
          "flag."),
    _Flag("work-deletion-hold-threshold", "float", _CONTROLLERS,
          "Share (0 to 1) of this cluster's Works whose deletion after an outage is held for "
          "--work-deletion-grace-period; fewer deletions proceed at once. Not an upstream "
          "flag."),
    _Flag("delete-adopted-resources", "bool", _CONTROLLERS,
          "Delete, with their Work, member objects that existed before the Work took them over "
          "(work.karmada.io/conflict-resolution: overwrite), as upstream does. Off: such objects "
          "are released (Karmada's labels and annotations removed) and left in place. The "
          "namespaces default, kube-system, kube-public, kube-node-lease and the agent's own "
          "are never deleted. Not an upstream flag."),
    _Flag("feature-gates", "gates", _CONTROLLERS,
          _GATES_HELP),
    _Flag("leader-elect", "bool", _LEADER,
          "Elect a leader among replicas before running controllers (registration runs in every "
          "replica)."),
    _Flag("leader-elect-lease-cluster", "str", _LEADER,
          "Where the leader-election Lease lives: 'karmada' (the control plane, as upstream: "
          "upstream agents and this one elect one leader among them, so a rolling replacement "
          "in either direction never runs two) or 'member' (the member cluster, which stays "
          "reachable when the control plane is not, so an outage costs no leadership; a "
          "replica waits for the control-plane Lease to be free before it campaigns). Not an "
          "upstream flag."),
    _Flag("leader-elect-resource-namespace", "str", _LEADER,
          "Namespace of the leader-election Lease (in the cluster --leader-elect-lease-cluster "
          "names)."),
    _Flag("leader-elect-lease-duration", "duration", _LEADER,
          "How long other candidates wait after the last renewal before taking over."),
    _Flag("leader-elect-renew-deadline", "duration", _LEADER,
          "How long the leader keeps trying to renew before it steps down."),
    _Flag("leader-elect-retry-period", "duration", _LEADER,
          "Wait between attempts to acquire or renew leadership."),
    _Flag("cert-rotation-checking-interval", "duration", _ROTATION,
          "How often certRotation checks the client certificate."),
    _Flag("cert-rotation-remaining-time-threshold", "float", _ROTATION,
          "Rotate when the remaining fraction of the certificate's lifetime falls to this "
          "value."),
    _Flag("karmada-kubeconfig-namespace", "str", _ROTATION,
          "Member namespace of the Secret karmada-kubeconfig that certRotation updates."),
    _Flag("karmada-kubeconfig-secret", "str", _ROTATION,
          "Name of the member Secret holding --karmada-kubeconfig, which certRotation updates "
          "(default: the Secret volume the agent's own Pod mounts it from, as Karmada's Helm "
          "chart's <release>-kubeconfig, else karmada-kubeconfig as karmadactl register writes "
          "it). Not an upstream flag."),
    _Flag("karmada-kubeconfig-secret-key", "str", _ROTATION,
          "Key of the kubeconfig in that Secret (default: as mounted, else karmada-kubeconfig). "
          "Not an upstream flag."),
    _Flag("tunnel-server-address", "str", _TUNNEL,
          "host:port of a konnectivity proxy-server's agent endpoint. When set, the agent keeps "
          "a tunnel to it, and registers the Cluster so that the control plane (cluster proxy, "
          "logs, search, metrics) reaches this member through it. Not an upstream flag."),
    _Flag("tunnel-server-name", "str", _TUNNEL,
          "Name to verify in the proxy-server's certificate (default: the host of "
          "--tunnel-server-address). Not an upstream flag."),
    _Flag("tunnel-server-ca-file", "str", _TUNNEL,
          "CA file to verify the proxy-server with (default: the CA of the Karmada kubeconfig). "
          "Not an upstream flag."),
    _Flag("tunnel-token-file", "str", _TUNNEL,
          "Service-account token file sent to the proxy-server, for its token authentication; "
          "re-read at every connection. Without it the agent's Karmada client certificate "
          "authenticates it (mTLS). Not an upstream flag."),
    _Flag("tunnel-proxy-url", "str", _TUNNEL,
          "The proxy-server's HTTP CONNECT address as the control plane reaches it; written to "
          "the Cluster's spec.proxyURL. Not an upstream flag."),
    _Flag("tunnel-domain", "str", _TUNNEL,
          "Domain of the cluster's route name <cluster-name>.<domain>, written to the "
          "Cluster's spec.apiEndpoint; never resolved. Not an upstream flag."),
    _Flag("tunnel-keepalive-time", "duration", _TUNNEL,
          "Idle time after which the tunnel pings the proxy-server. Not an upstream flag."),
    _Flag("metrics-bind-address", "str", _SERVING,
          "Address for Prometheus metrics (host:port or :port); 0 disables."),
    _Flag("health-probe-bind-address", "str", _SERVING,
          "Address for /healthz and /readyz (host:port or :port); 0 disables."),
    _Flag("enable-pprof", "bool", _SERVING,
          "Accepted for compatibility; this agent has no pprof endpoint."),
    _Flag("profiling-bind-address", "str", _SERVING,
          "Accepted for compatibility (see --enable-pprof)."),
    _Flag("v", "int", _LOGGING,
          "Log verbosity as klog levels: 0-3 info, 4 and up debug, 6 and up HTTP client logs.",
          dest="verbosity", short="-v"),
    _Flag("log-format", "str", _LOGGING,
          "auto (JSON unless stdout is a terminal), json or console. Not an upstream flag."),
)
# fmt: on

# klog/component-base logging flags: accepted so upstream command lines keep working, then ignored.
_KLOG_BOOL_FLAGS = (
    "add-dir-header",
    "alsologtostderr",
    "legacy-stderr-threshold-behavior",
    "log-json-split-stream",
    "log-text-split-stream",
    "logtostderr",
    "one-output",
    "skip-headers",
    "skip-log-headers",
)
_KLOG_VALUE_FLAGS = (
    "alsologtostderrthreshold",
    "log-backtrace-at",
    "log-dir",
    "log-file",
    "log-file-max-size",
    "log-flush-frequency",
    "log-json-info-buffer-size",
    "log-text-info-buffer-size",
    "logging-format",
    "stderrthreshold",
    "vmodule",
)

_KIND_PARSERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "bool": parse_go_bool,
    "int": _parse_int,
    "float": _parse_float,
    "duration": parse_duration,
    "list": _parse_list,
    "gates": parse_feature_gates,
}


def default_text(value: Any) -> str:
    """A default as pflag prints it; "" when pflag would print none (zero values)."""
    if isinstance(value, bool):
        return "true" if value else ""
    if isinstance(value, timedelta):
        return format_duration(value) if value else ""
    if isinstance(value, tuple):
        return f"[{','.join(value)}]" if value else ""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return f'"{value}"' if value else ""
    if isinstance(value, int):
        return str(value) if value else ""
    return ""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROGRAM,
        usage=f"{PROGRAM} [flags]\n       {PROGRAM} version",
        description=(
            "Pull-mode member agent for Karmada: registers this cluster with the Karmada control "
            "plane, applies the Works placed on it, and reports their status and the cluster's."
        ),
        allow_abbrev=False,
        formatter_class=_HelpFormatter,
        add_help=False,
    )
    parser.add_argument(
        "-h", "--help", nargs=0, action=_HelpAction, help="Show this help and exit."
    )
    defaults = Options()
    groups: dict[str, argparse._ArgumentGroup] = {}
    for flag in FLAGS:
        group = groups.get(flag.group) or groups.setdefault(
            flag.group, parser.add_argument_group(flag.group)
        )
        names = [n for n in (flag.short, f"--{flag.name}") if n]
        default = getattr(defaults, flag.attribute)
        shown = default_text(default)
        help_text = f"{flag.help} (default {shown})" if shown else flag.help
        convert = _converter(_KIND_PARSERS[flag.kind])
        if flag.kind == "bool":
            group.add_argument(
                *names, dest=flag.attribute, type=convert, nargs="?", const=True,
                metavar="true|false", help=help_text,
            )  # fmt: skip
        elif flag.kind == "list":
            group.add_argument(
                *names, dest=flag.attribute, type=convert, action=_ListAction,
                metavar="strings", help=help_text,
            )  # fmt: skip
        elif flag.kind == "gates":
            group.add_argument(
                *names, dest=flag.attribute, type=convert, action=_GatesAction,
                metavar="Name=bool,...", help=help_text,
            )  # fmt: skip
        else:
            group.add_argument(
                *names, dest=flag.attribute, type=convert, metavar=flag.kind, help=help_text
            )
    klog = parser.add_argument_group("klog flags (accepted for compatibility, ignored)")
    for name in _KLOG_BOOL_FLAGS:
        klog.add_argument(f"--{name}", dest=name.replace("-", "_"), nargs="?", action=_IgnoredAction,
                          help=argparse.SUPPRESS)  # fmt: skip
    for name in _KLOG_VALUE_FLAGS:
        klog.add_argument(f"--{name}", dest=name.replace("-", "_"), action=_IgnoredAction,
                          help=argparse.SUPPRESS)  # fmt: skip
    klog.description = "--" + ", --".join((*_KLOG_BOOL_FLAGS, *_KLOG_VALUE_FLAGS))
    initial = {flag.attribute: getattr(defaults, flag.attribute) for flag in FLAGS}
    initial.update(feature_gates={}, ignored_flags=())  # gates: only the explicit settings
    parser.set_defaults(**initial)
    return parser


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """Go components accept `--flag_name` for `--flag-name`; so do we (flag names only)."""
    result: list[str] = []
    for index, arg in enumerate(argv):
        if arg == "--":
            result.extend(argv[index:])
            break
        if arg.startswith("--"):
            name, sep, value = arg.partition("=")
            arg = name.replace("_", "-") + sep + value
        result.append(arg)
    return result


def parse_options(argv: Sequence[str]) -> Options:
    """Parse and validate a command line (without the program name).

    Raises OptionsError (every problem names its flag) or HelpRequested (with the help text).
    """
    namespace = build_parser().parse_args(normalize_argv(argv))
    values = {
        f.name: getattr(namespace, f.name) for f in fields(Options) if hasattr(namespace, f.name)
    }
    values["feature_gates"] = resolve_feature_gates(values.get("feature_gates") or {})
    options = Options(**_apply_upstream_fallbacks(values))
    problems = validate(options)
    if problems:
        raise OptionsError(problems)
    return options
