"""The tunnel's Prometheus metrics.

Named as the konnectivity agent (ANP pkg/agent/metrics, namespace konnectivity_network_proxy,
subsystem agent) names the same facts, so dashboards built for proxy-agent read them; the
refused dials and the connection attempts are this agent's own.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from agent.tunnel.packets import PacketType

_PREFIX = "konnectivity_network_proxy_agent_"
DIAL_BUCKETS = (0.005, 0.025, 0.1, 0.5, 2.5, 12.5)
SEGMENT_FROM_AGENT = "from_agent"
SEGMENT_TO_AGENT = "to_agent"


class TunnelMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.open_server_connections = Gauge(
            _PREFIX + "open_server_connections",
            "Current number of open server connections.",
            registry=registry,
        )
        self.known_server_count = Gauge(
            _PREFIX + "known_server_count",
            "Current number of servers agent is trying to connect to.",
            registry=registry,
        )
        self.open_endpoint_connections = Gauge(
            _PREFIX + "open_endpoint_connections",
            "Current number of open endpoint connections.",
            registry=registry,
        )
        self.dial_duration = Histogram(
            _PREFIX + "dial_duration_seconds",
            "Latency of dial to the remote endpoint in seconds",
            buckets=DIAL_BUCKETS,
            registry=registry,
        )
        self.dial_failures = Counter(
            _PREFIX + "endpoint_dial_failure",
            "Number of failures dialing the remote endpoint, by reason (example: timeout).",
            ["reason"],
            registry=registry,
        )
        packets = Counter(
            _PREFIX + "stream_packets",
            "Count of packets processed, by segment and packet type (example: from_agent, "
            "DIAL_REQ)",
            ["segment", "packet_type"],
            registry=registry,
        )
        # Children resolved once: DATA packets are counted on the hot path.
        self.packets = {
            (segment, kind): packets.labels(segment, kind.name)
            for segment in (SEGMENT_FROM_AGENT, SEGMENT_TO_AGENT)
            for kind in PacketType
        }
        self.refused_dials = Counter(
            "karmada_agent_tunnel_refused_dials",
            "Dial requests through the tunnel for any address other than the cluster's own "
            "route, refused (DIAL_RSP with an error).",
            registry=registry,
        )
        self.refused_streams = Counter(
            "karmada_agent_tunnel_refused_streams",
            "Connections through the tunnel refused because --tunnel-max-streams were open "
            "(answered 429 TooManyRequests by the agent itself).",
            registry=registry,
        )
        self.max_streams = Gauge(
            "karmada_agent_tunnel_max_streams",
            "The cap on connections the tunnel carries at once (--tunnel-max-streams).",
            registry=registry,
        )
        self.route_held = Gauge(
            "karmada_agent_tunnel_route_held",
            "1 when the last check of the cluster's route through the control plane reached "
            "this agent, 0 when it answered for someone else (agent.tunnel.route_check).",
            registry=registry,
        )
        self.route_checks = Counter(
            "karmada_agent_tunnel_route_checks",
            "Checks of the cluster's route through the control plane, by result (held, claimed, "
            "unknown: not connected, or the control plane refused the agent).",
            ["result"],
            registry=registry,
        )
        self.connects = Counter(
            "karmada_agent_tunnel_connects",
            "Attempts to connect to a proxy-server instance, by result (success, error, "
            "duplicate: an instance already connected).",
            ["result"],
            registry=registry,
        )

        self.keepalives = Counter(
            "karmada_agent_tunnel_keepalive_pings",
            "HTTP/2 PINGs the tunnel sent to proxy-server instances after --tunnel-keepalive-time "
            "without traffic (its idle cost).",
            registry=registry,
        )

    def packet(self, segment: str, kind: PacketType) -> None:
        self.packets[(segment, kind)].inc()
