"""Listen addresses of the metrics and health endpoints, as controller-runtime's flags take them."""

from __future__ import annotations

from dataclasses import dataclass


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
