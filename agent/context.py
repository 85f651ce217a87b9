"""What every controller of the agent is given: the two API clients and shared machinery.

`app.run` builds one AgentContext after registration; each controller module
exposes `build(ctx) -> Runnable`, and the controller manager starts the enabled
ones when this replica leads and stops them when it stops leading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .interpreter import Interpreter
from .kube.client import KubeClient
from .kube.discovery import RESTMapper
from .options import Options

if TYPE_CHECKING:
    from .controllers.interpreter_config import ConfigWatch
    from .controllers.interpreter_webhooks import AgentInterpreter
    from .controllers.link import ControlPlaneLink
    from .controllers.member_objects import MemberObjects
    from .controllers.slice_reports import MemberSlices
    from .controllers.work_informer import ClusterWatch, WorkInformer
    from .controllers.work_record import WorkRecords
    from .events import EventRecorder
    from .metrics import AgentMetrics


class Runnable(Protocol):
    name: str

    async def start(self) -> None:
        """Start background work and return; failures inside are retried, never raised."""
        ...

    async def stop(self) -> None:
        """Stop taking work, finish or abandon in-flight work, return within a bound."""
        ...


@dataclass
class AgentContext:
    options: Options
    cluster_name: str
    # The Karmada control plane (Works, Cluster, Lease, Events) and the member cluster.
    karmada: KubeClient
    member: KubeClient
    karmada_mapper: RESTMapper
    member_mapper: RESTMapper
    # Member-side list+watch per resource type in use, shared by execution and workStatus.
    member_objects: MemberObjects
    events: EventRecorder
    metrics: AgentMetrics
    # Health, status and retention of member objects: customizations, then built-in rules.
    interpreter: Interpreter = field(default_factory=Interpreter)
    _config_watches: list[ConfigWatch] | None = field(default=None, init=False, repr=False)
    _interpretation: AgentInterpreter | None = field(default=None, init=False, repr=False)
    _cluster_watch: ClusterWatch | None = field(default=None, init=False, repr=False)
    _work_informer: WorkInformer | None = field(default=None, init=False, repr=False)
    _member_slices: MemberSlices | None = field(default=None, init=False, repr=False)
    _link: ControlPlaneLink | None = field(default=None, init=False, repr=False)
    _records: WorkRecords | None = field(default=None, init=False, repr=False)

    def work_records(self) -> WorkRecords:
        """The durable record of the applied Works, in the agent's namespace on the member."""
        if self._records is None:
            from .controllers.work_record import WorkRecords

            self._records = WorkRecords(
                self.member, self.options.karmada_kubeconfig_namespace, self.cluster_name
            )
        return self._records

    def use_sources(self, works: WorkInformer, cluster: ClusterWatch) -> None:
        """Serve these Works and this Cluster in place of the control plane's watches (the
        recorded ones while the control plane is unreachable)."""
        self._work_informer = works
        self._cluster_watch = cluster

    def control_plane_link(self) -> ControlPlaneLink:
        """What the heartbeat learns about the link to the control plane (long outages), for
        the controllers that act on it."""
        if self._link is None:
            from .controllers.link import ControlPlaneLink

            self._link = ControlPlaneLink(self.options.cluster_lease_duration.total_seconds())
        return self._link

    def work_informer(self) -> WorkInformer:
        """The Works of the execution namespace from one list+watch shared by the controllers
        that read them (each starts and stops it; it runs while any of them does)."""
        if self._work_informer is None:
            from .controllers.work_informer import WorkInformer

            self._work_informer = WorkInformer(self.karmada, self.execution_namespace)
        return self._work_informer

    def cluster_watch(self) -> ClusterWatch:
        """This cluster's Cluster object from one list+watch shared by every controller that
        reads it (each starts and stops it; the watch runs while any of them does)."""
        if self._cluster_watch is None:
            from .controllers.work_informer import ClusterWatch

            self._cluster_watch = ClusterWatch(self.karmada, self.cluster_name)
        return self._cluster_watch

    def interpreter_config_watches(self) -> list[ConfigWatch]:
        """The control plane's interpreter customizations and webhook configurations from one
        list+watch each, kept in `interpreter` (started and stopped by each controller that
        interprets objects)."""
        if self._config_watches is None:
            from .controllers.interpreter_config import config_watches

            self._config_watches = config_watches(self.karmada, self.interpreter)
        return self._config_watches

    def interpretation(self) -> AgentInterpreter:
        """`interpreter` with the webhook calls: what the controllers ask."""
        if self._interpretation is None:
            from .controllers.interpreter_webhooks import AgentInterpreter

            self._interpretation = AgentInterpreter(self.interpreter)
        return self._interpretation

    def member_slices(self) -> MemberSlices:
        """The member's Service EndpointSlices from one list+watch shared by serviceExport and
        endpointsliceCollect (each starts and stops it)."""
        if self._member_slices is None:
            from .controllers.slice_reports import MemberSlices

            self._member_slices = MemberSlices(self.member)
        return self._member_slices

    @property
    def execution_namespace(self) -> str:
        return f"karmada-es-{self.cluster_name}"
