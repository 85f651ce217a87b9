"""The sources layer: what the controllers read, built once by the app and handed to them.

Every watch here is shared: one list+watch per agent, however many controllers read it (each
controller declares what it reads, agent.controllers.watches, and the controller manager starts
each source once). The app builds the `Sources` for the mode it runs in: `live_sources` (the control plane's watches)
once registered, `offline_sources` (the durable record of the Works, agent.sources.recorded)
while the control plane cannot be reached. The controllers see the same interfaces either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.interpreter import Interpreter
from agent.karmada.names import execution_namespace
from agent.kube.client import KubeClient
from agent.options import Options

from .cluster import ClusterInformer
from .interpreter import AgentInterpreter
from .interpreter_config import ConfigInformer, config_watches
from .link import ControlPlaneLink
from .member_objects import MemberObjects
from .member_slices import MemberSlices
from .recorded import MemberOnlyCluster, RecordedWorks
from .work_records import WorkRecords
from .works import WorkInformer


@dataclass(frozen=True)
class Sources:
    # Control plane: the Works of karmada-es-<cluster>, and this cluster's Cluster object.
    works: WorkInformer
    cluster: ClusterInformer
    # Member: Karmada's objects (one list+watch per resource type in use) and Service
    # EndpointSlices.
    member_objects: MemberObjects
    member_slices: MemberSlices
    # The durable record of the applied Works, in the agent's namespace on the member.
    records: WorkRecords
    # What the heartbeat learns about the link to the control plane (long outages).
    link: ControlPlaneLink
    # The control plane's interpreter customizations and webhook configurations, kept in the
    # interpreter; and the interpreter the controllers ask, its webhook calls included.
    interpreter_config: tuple[ConfigInformer, ...]
    interpreter: AgentInterpreter


def live_sources(
    karmada: KubeClient, member: KubeClient, options: Options, *, works: WorkInformer | None = None
) -> Sources:
    """The sources of a registered agent: the control plane's watches (`works`: its Works'
    watch, when already running)."""
    return _sources(
        karmada,
        member,
        options,
        works=works or WorkInformer(karmada, execution_namespace(options.cluster_name)),
        cluster=ClusterInformer(karmada, options.cluster_name),
        records=work_records(member, options),
    )


def offline_sources(
    karmada: KubeClient,
    member: KubeClient,
    options: Options,
    *,
    records: WorkRecords,
    works: RecordedWorks,
) -> Sources:
    """The sources of an agent serving the recorded Works while the control plane is
    unreachable: those Works, and a Cluster the member alone stands for."""
    return _sources(
        karmada,
        member,
        options,
        works=works,
        cluster=MemberOnlyCluster(karmada, options.cluster_name),
        records=records,
    )


def work_records(member: KubeClient, options: Options) -> WorkRecords:
    return WorkRecords(member, options.karmada_kubeconfig_namespace, options.cluster_name)


def _sources(
    karmada: KubeClient,
    member: KubeClient,
    options: Options,
    *,
    works: WorkInformer,
    cluster: ClusterInformer,
    records: WorkRecords,
) -> Sources:
    interpreter = Interpreter()
    return Sources(
        works=works,
        cluster=cluster,
        member_objects=MemberObjects(member, options),
        member_slices=MemberSlices(member),
        records=records,
        link=ControlPlaneLink(
            options.cluster_lease_duration.total_seconds(),
            server_time=karmada.transport.server_clock.now,
        ),
        interpreter_config=tuple(config_watches(karmada, interpreter)),
        interpreter=AgentInterpreter(interpreter),
    )
