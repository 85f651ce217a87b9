"""The cluster's one route through the proxy-server, and the only dials the agent accepts.

The control plane reaches a cluster at `https://<cluster>.<domain>:<port>` (Cluster
spec.apiEndpoint) through the proxy-server (spec.proxyURL). The proxy-server routes a CONNECT by
its destination host (destHost strategy) to the agent that registered that host as an
identifier, so the name is unique per cluster even where members share private addresses, and
it is also the TLS name the control plane verifies (agent.tunnel.route_ca). The name is never
resolved: the default domain `karmada-tunnel.invalid` uses the TLD that RFC 6761 reserves to
never resolve, so nothing can reach it except through the proxy-server.

Any DIAL_REQ for another address is refused: the agent dials nothing but its own member API
server, whatever the proxy-server asks. Each refused address is logged once (a bounded set) and
every refusal is counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

from agent.logs import get_logger

DEFAULT_DOMAIN = "karmada-tunnel.invalid"
DEFAULT_PORT = 443
# Distinct refused addresses remembered for logging once; beyond it they are counted only.
REFUSED_ADDRESSES_LOGGED = 1024

log = get_logger(__name__)


@dataclass(frozen=True)
class Route:
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def api_endpoint(self) -> str:
        return f"https://{self.address}"

    @property
    def agent_identifiers(self) -> str:
        """The `agentIdentifiers` metadata: URL-encoded, as the proxy-server parses it."""
        return urlencode({"host": self.host})


@dataclass(frozen=True)
class TunnelPublication:
    """What registration writes for the tunnel: Cluster spec.apiEndpoint and spec.proxyURL,
    and the Cluster Secret's caBundle (base64 of the tunnel CA's PEM)."""

    api_endpoint: str
    proxy_url: str
    ca_bundle: str


def route_for(cluster: str, domain: str = DEFAULT_DOMAIN, port: int = DEFAULT_PORT) -> Route:
    return Route(f"{cluster}.{domain}".lower(), port)


def _normalize(address: str) -> str:
    host, sep, port = address.rpartition(":")
    if not sep:
        return address.lower()
    return f"{host.strip('[]').lower().rstrip('.')}:{port}"


class DialPolicy:
    """Decides each DIAL_REQ: only TCP to the route's own address."""

    def __init__(self, route: Route, *, on_refused: Callable[[], None] | None = None) -> None:
        self.route = route
        self._on_refused = on_refused
        self._logged: set[str] = set()
        self.refused = 0
        self.allowed = 0  # dials for the route that reached this agent (agent.tunnel.route_check)

    def refusal(self, protocol: str, address: str) -> str | None:
        """None when the dial is allowed, otherwise the error for its DIAL_RSP."""
        if protocol == "tcp" and _normalize(address) == self.route.address:
            self.allowed += 1
            return None
        self.refused += 1
        if self._on_refused is not None:
            self._on_refused()
        key = f"{protocol} {address}"
        if key not in self._logged and len(self._logged) < REFUSED_ADDRESSES_LOGGED:
            self._logged.add(key)
            log.warning(
                "refused a dial through the tunnel: this agent dials only its own member API "
                "server at its route",
                protocol=protocol,
                address=address,
                route=self.route.address,
            )
        return f"dial refused: this agent serves only {self.route.address} (tcp)"
