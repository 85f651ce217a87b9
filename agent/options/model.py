"""The agent's options: every flag's value, with upstream's defaults, and what follows from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from agent.karmada.names import DEFAULT_AGENT_NAMESPACE, DEFAULT_CLUSTER_NAMESPACE
from agent.options.bind_address import BindAddress, parse_bind_address
from agent.options.controller_selection import CONTROLLERS, ControllerSelection
from agent.options.feature_gates import resolve_feature_gates

REPORT_SECRET_KINDS = ("KubeCredentials", "KubeImpersonator")
# The CONNECT frontend of deploy/control-plane/tunnel-server, as the aggregated apiserver reaches it.
DEFAULT_TUNNEL_PROXY_URL = "http://karmada-tunnel-connect.karmada-system.svc:8090"
# RFC 6761 reserves .invalid never to resolve: the route name is only reachable through the tunnel.
DEFAULT_TUNNEL_DOMAIN = "karmada-tunnel.invalid"
# Connections the tunnel carries at once: 500 open watches add about 40 MiB to the agent's RSS
# (docs/benchmarks.md, bench.tunnel), well inside deploy/base's 384Mi limit with its own work.
DEFAULT_TUNNEL_MAX_STREAMS = 500
# The stock proxy-server answers pings more frequent than this with GOAWAY (too_many_pings).
MIN_TUNNEL_KEEPALIVE = timedelta(seconds=30)
LOG_FORMATS = ("auto", "json", "console")
# Where the leader-election Lease lives: the Karmada control plane (default: upstream's place, so
# upstream agents and this one elect one leader among them) or the member cluster (reachable while
# the control plane is not).
LEASE_CLUSTERS = ("karmada", "member")
LogFormat = Literal["auto", "json", "console"]


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
    tunnel_service_account: str = ""
    tunnel_token_audience: str = "karmada-tunnel"
    tunnel_proxy_url: str = DEFAULT_TUNNEL_PROXY_URL
    tunnel_domain: str = DEFAULT_TUNNEL_DOMAIN
    tunnel_keepalive_time: timedelta = timedelta(seconds=40)
    tunnel_max_streams: int = DEFAULT_TUNNEL_MAX_STREAMS
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
