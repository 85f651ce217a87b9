"""What every controller of the agent is given: the two API clients, the sources they read and
the machinery they share.

`app.run` builds one AgentContext after registration (and one on the recorded sources while
registration waits for the control plane); each controller module exposes
`build(ctx) -> Runnable`, and the controller manager starts the enabled ones when this replica
leads and stops them when it stops leading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .events import EventEmitter
from .karmada.names import execution_namespace
from .kube.client import KubeClient
from .kube.discovery import RESTMapper
from .metrics import AgentMetrics
from .options import Options
from .sources import Sources


class Runnable(Protocol):
    name: str

    async def start(self) -> None:
        """Start background work and return; failures inside are retried, never raised."""
        ...

    async def stop(self) -> None:
        """Stop taking work, finish or abandon in-flight work, return within a bound."""
        ...


@dataclass(frozen=True)
class AgentContext:
    options: Options
    cluster_name: str
    # The Karmada control plane (Works, Cluster, Lease, Events) and the member cluster.
    karmada: KubeClient
    member: KubeClient
    karmada_mapper: RESTMapper
    member_mapper: RESTMapper
    events: EventEmitter
    metrics: AgentMetrics
    # The shared watches, the Work records, the link and the interpreter (agent.sources).
    sources: Sources

    @property
    def execution_namespace(self) -> str:
        return execution_namespace(self.cluster_name)
