"""A test double of the konnectivity (ANP) proxy-server: the hub side of the agent's tunnel.

`ProxyServerDouble` serves `AgentService.Connect` to agents and an HTTP CONNECT frontend to
clients, routing each CONNECT by its destination host as the stock `proxy-server
--mode=http-connect --proxy-strategies=destHost` does. The stock binary itself is started by
`emulator.upstream` where it is available; tests run against both.
"""

from .proxy_server import ProxyServerDouble

__all__ = ["ProxyServerDouble"]
