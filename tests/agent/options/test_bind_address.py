"""Listen addresses (agent/options/bind_address.py)."""

from __future__ import annotations

from agent.options.bind_address import BindAddress, parse_bind_address
from tests.agent.options.support import parse


def test_bind_addresses() -> None:
    options = parse("--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:9000")
    assert options.metrics_bind is None
    assert options.health_probe_bind == BindAddress("127.0.0.1", 9000)
    assert parse_bind_address(":8080") == BindAddress("", 8080)
    assert parse_bind_address("[::1]:10357") == BindAddress("::1", 10357)
