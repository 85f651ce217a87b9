"""The flag table: every flag's name, value kind, help group and help text, and klog's flags that
are accepted and ignored. Defaults are those of agent.options.model.Options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent.options.controller_selection import CONTROLLERS
from agent.options.feature_gates import FEATURE_GATES

Kind = Literal["str", "bool", "int", "float", "duration", "list", "gates"]


@dataclass(frozen=True)
class Flag:
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
FLAGS: tuple[Flag, ...] = (
    Flag("cluster-name", "str", _REGISTRATION,
          "Name of the member cluster this agent serves (required)."),
    Flag("cluster-namespace", "str", _REGISTRATION,
          "Namespace on the control plane for this cluster's reported secrets."),
    Flag("cluster-api-endpoint", "str", _REGISTRATION,
          "API endpoint of this member cluster, written to the Cluster's spec.apiEndpoint."),
    Flag("proxy-server-address", "str", _REGISTRATION,
          "Proxy (http, https or socks5 URL) through which the control plane reaches this "
          "cluster; spec.proxyURL."),
    Flag("cluster-provider", "str", _REGISTRATION,
          "Provider of this cluster, for spreading workloads across providers."),
    Flag("cluster-region", "str", _REGISTRATION,
          "Region of this cluster, for spreading workloads across regions."),
    Flag("cluster-zones", "list", _REGISTRATION,
          "Zones of this cluster (comma-separated), for spreading workloads across zones."),
    Flag("report-secrets", "list", _REGISTRATION,
          "Secrets to report to the control plane at registration: KubeCredentials, "
          "KubeImpersonator, both, or None."),
    Flag("karmada-kubeconfig", "str", _CONNECTIONS,
          "Path to the kubeconfig of the Karmada control plane."),
    Flag("karmada-context", "str", _CONNECTIONS,
          "Context to use in --karmada-kubeconfig (default: its current context)."),
    Flag("kubeconfig", "str", _CONNECTIONS,
          "Path to a kubeconfig of the member cluster; only needed outside the cluster."),
    Flag("kube-api-qps", "float", _CONNECTIONS,
          "Client-side QPS limit towards the Karmada API server."),
    Flag("kube-api-burst", "int", _CONNECTIONS,
          "Client-side burst towards the Karmada API server."),
    Flag("cluster-api-qps", "float", _CONNECTIONS,
          "Client-side QPS limit towards the member cluster's API server."),
    Flag("cluster-api-burst", "int", _CONNECTIONS,
          "Client-side burst towards the member cluster's API server."),
    Flag("cluster-status-update-frequency", "duration", _STATUS,
          "How often the cluster status is computed and reported; keep it in step with the "
          "controller manager's --cluster-monitor-grace-period."),
    Flag("cluster-lease-duration", "duration", _STATUS,
          "Lifetime of the cluster heartbeat Lease."),
    Flag("cluster-lease-renew-interval-fraction", "float", _STATUS,
          "The heartbeat Lease is renewed every lease duration times this fraction (between 0 "
          "and 1)."),
    Flag("cluster-success-threshold", "duration", _STATUS,
          "How long health checks must succeed before the cluster is reported Ready again."),
    Flag("cluster-failure-threshold", "duration", _STATUS,
          "How long health checks must fail before the cluster is reported not Ready."),
    Flag("cluster-cache-sync-timeout", "duration", _STATUS,
          "How long to wait for caches to fill."),
    Flag("enable-cluster-resource-modeling", "bool", _STATUS,
          "Build resource models (allocatable modelings) from the member's Nodes and Pods."),
    Flag("controllers", "list", _CONTROLLERS,
          _CONTROLLERS_HELP),
    Flag("concurrent-cluster-syncs", "int", _CONTROLLERS,
          "Number of Clusters synced concurrently."),
    Flag("concurrent-work-syncs", "int", _CONTROLLERS,
          "Number of Works synced concurrently."),
    Flag("resync-period", "duration", _CONTROLLERS,
          "Base period of informer resyncs; 0 disables them."),
    Flag("rate-limiter-base-delay", "duration", _CONTROLLERS,
          "Base delay of the per-item exponential retry backoff."),
    Flag("rate-limiter-max-delay", "duration", _CONTROLLERS,
          "Maximum delay of the per-item exponential retry backoff."),
    Flag("rate-limiter-qps", "int", _CONTROLLERS,
          "Refill rate of the work queues' shared token bucket."),
    Flag("rate-limiter-bucket-size", "int", _CONTROLLERS,
          "Size of the work queues' shared token bucket."),
    Flag("work-deletion-grace-period", "duration", _CONTROLLERS,
          "After the control plane was out of reach for longer than --cluster-lease-duration, "
          "Work deletions seen in the first window after it answers again are held this long "
          "when they are a large share of this cluster's Works (see "
          "--work-deletion-hold-threshold); 0 deletes at once, as upstream. Not an upstream "
          "flag."),
    Flag("work-deletion-hold-threshold", "float", _CONTROLLERS,
          "Share (0 to 1) of this cluster's Works whose deletion after an outage is held for "
          "--work-deletion-grace-period; fewer deletions proceed at once. Not an upstream "
          "flag."),
    Flag("delete-adopted-resources", "bool", _CONTROLLERS,
          "Delete, with their Work, member objects that existed before the Work took them over "
          "(work.karmada.io/conflict-resolution: overwrite), as upstream does. Off: such objects "
          "are released (Karmada's labels and annotations removed) and left in place. The "
          "namespaces default, kube-system, kube-public, kube-node-lease and the agent's own "
          "are never deleted. Not an upstream flag."),
    Flag("feature-gates", "gates", _CONTROLLERS,
          _GATES_HELP),
    Flag("leader-elect", "bool", _LEADER,
          "Elect a leader among replicas before running controllers (registration runs in every "
          "replica)."),
    Flag("leader-elect-lease-cluster", "str", _LEADER,
          "Where the leader-election Lease lives: 'karmada' (the control plane, as upstream: "
          "upstream agents and this one elect one leader among them, so a rolling replacement "
          "in either direction never runs two) or 'member' (the member cluster, which stays "
          "reachable when the control plane is not, so an outage costs no leadership; a "
          "replica waits for the control-plane Lease to be free before it campaigns). Not an "
          "upstream flag."),
    Flag("leader-elect-resource-namespace", "str", _LEADER,
          "Namespace of the leader-election Lease (in the cluster --leader-elect-lease-cluster "
          "names)."),
    Flag("leader-elect-lease-duration", "duration", _LEADER,
          "How long other candidates wait after the last renewal before taking over."),
    Flag("leader-elect-renew-deadline", "duration", _LEADER,
          "How long the leader keeps trying to renew before it steps down."),
    Flag("leader-elect-retry-period", "duration", _LEADER,
          "Wait between attempts to acquire or renew leadership."),
    Flag("cert-rotation-checking-interval", "duration", _ROTATION,
          "How often certRotation checks the client certificate."),
    Flag("cert-rotation-remaining-time-threshold", "float", _ROTATION,
          "Rotate when the remaining fraction of the certificate's lifetime falls to this "
          "value."),
    Flag("karmada-kubeconfig-namespace", "str", _ROTATION,
          "Member namespace of the Secret karmada-kubeconfig that certRotation updates."),
    Flag("karmada-kubeconfig-secret", "str", _ROTATION,
          "Name of the member Secret holding --karmada-kubeconfig, which certRotation updates "
          "(default: the Secret volume the agent's own Pod mounts it from, as Karmada's Helm "
          "chart's <release>-kubeconfig, else karmada-kubeconfig as karmadactl register writes "
          "it). Not an upstream flag."),
    Flag("karmada-kubeconfig-secret-key", "str", _ROTATION,
          "Key of the kubeconfig in that Secret (default: as mounted, else karmada-kubeconfig). "
          "Not an upstream flag."),
    Flag("tunnel-server-address", "str", _TUNNEL,
          "host:port of a konnectivity proxy-server's agent endpoint. When set, the agent keeps "
          "a tunnel to it, and registers the Cluster so that the control plane (cluster proxy, "
          "logs, search, metrics) reaches this member through it. Not an upstream flag."),
    Flag("tunnel-server-name", "str", _TUNNEL,
          "Name to verify in the proxy-server's certificate (default: the host of "
          "--tunnel-server-address). Not an upstream flag."),
    Flag("tunnel-server-ca-file", "str", _TUNNEL,
          "CA file to verify the proxy-server with (default: the CA of the Karmada kubeconfig). "
          "Not an upstream flag."),
    Flag("tunnel-token-file", "str", _TUNNEL,
          "Service-account token file sent to the proxy-server, for its token authentication; "
          "re-read at every connection. Without it the agent's Karmada client certificate "
          "authenticates it (mTLS). Not an upstream flag."),
    Flag("tunnel-service-account", "str", _TUNNEL,
          "<namespace>/<name> of a ServiceAccount on the Karmada control plane whose bound token "
          "(requested by the agent with TokenRequest, for --tunnel-token-audience) authenticates "
          "it to the proxy-server's token review; a credential users never hold. Not an upstream "
          "flag."),
    Flag("tunnel-token-audience", "str", _TUNNEL,
          "Audience of the tokens requested for --tunnel-service-account (the proxy-server's "
          "--authentication-audience). Not an upstream flag."),
    Flag("tunnel-proxy-url", "str", _TUNNEL,
          "The proxy-server's HTTP CONNECT address as the control plane reaches it; written to "
          "the Cluster's spec.proxyURL. Not an upstream flag."),
    Flag("tunnel-domain", "str", _TUNNEL,
          "Domain of the cluster's route name <cluster-name>.<domain>, written to the "
          "Cluster's spec.apiEndpoint; never resolved. Not an upstream flag."),
    Flag("tunnel-keepalive-time", "duration", _TUNNEL,
          "Idle time after which the tunnel pings the proxy-server. Not an upstream flag."),
    Flag("tunnel-max-streams", "int", _TUNNEL,
          "Connections the tunnel carries at once (watches, logs, exec and requests through the "
          "cluster proxy); beyond it a request is answered 429 TooManyRequests by the agent. "
          "Bounds the agent's memory. Not an upstream flag."),
    Flag("metrics-bind-address", "str", _SERVING,
          "Address for Prometheus metrics (host:port or :port); 0 disables."),
    Flag("health-probe-bind-address", "str", _SERVING,
          "Address for /healthz and /readyz (host:port or :port); 0 disables."),
    Flag("enable-pprof", "bool", _SERVING,
          "Accepted for compatibility; this agent has no pprof endpoint."),
    Flag("profiling-bind-address", "str", _SERVING,
          "Accepted for compatibility (see --enable-pprof)."),
    Flag("v", "int", _LOGGING,
          "Log verbosity as klog levels: 0-3 info, 4 and up debug, 6 and up HTTP client logs.",
          dest="verbosity", short="-v"),
    Flag("log-format", "str", _LOGGING,
          "auto (JSON unless stdout is a terminal), json or console. Not an upstream flag."),
)
# fmt: on

# klog/component-base logging flags: accepted so upstream command lines keep working, then ignored.
KLOG_BOOL_FLAGS = (
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
KLOG_VALUE_FLAGS = (
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
