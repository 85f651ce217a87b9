"""What an emulator serves and runs: the `member` and `karmada` profiles.

A profile names the extra resource types to register (beyond CORE's built-ins), the
objects to seed once the server answers, the controllers to run, and object uids that
must be stable across restarts (the member's kube-system uid is its Karmada cluster id).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from emulator.controllers import (
    Controller,
    ControllerContext,
    Knobs,
    agent_csr_approver,
    authentication_trust,
    bootstrap_signer,
    cluster_controller,
    csr_signer,
    endpointslice_controller,
    token_controller,
    workload_simulator,
)
from emulator.controllers.seed import seed_karmada, seed_member, stable_uid
from emulator.kubelet.server import KubeletStreams
from emulator.pod_logs import PodLogs

# (group, resource, namespace, name) -> uid
FixedUids = dict[tuple[str, str, str, str], str]
# A custom subresource the profile serves: (group, resource, subresource, make(storage, knobs))
# (typed loosely: the handler signature is CORE's).
Subresource = tuple[str, str, str, Callable[[Any, Knobs], Any]]


@dataclass
class Profile:
    name: str
    # registry.ResourceType instances (typed loosely: the registry is CORE's).
    types: list[Any]
    seed: Callable[[ControllerContext], Awaitable[None]]
    controllers: list[Controller]
    # The server must give these objects these uids when they are created.
    fixed_uids: FixedUids = field(default_factory=dict)
    subresources: list[Subresource] = field(default_factory=list)
    # Run metrics-server beside the API server (metrics.k8s.io through the aggregation layer).
    metrics_server: bool = False


COMMON_CONTROLLERS: list[Controller] = [
    csr_signer.run,
    token_controller.run,
    authentication_trust.run,
]


def member_profile(name: str = "member1") -> Profile:
    kubelet: list[KubeletStreams] = []

    def streams(storage: Any) -> KubeletStreams:
        """One set of emulated containers behind exec, attach and port-forward."""
        if not kubelet:
            kubelet.append(KubeletStreams(storage))
        return kubelet[0]

    return Profile(
        name="member",
        types=[],
        seed=seed_member,
        controllers=[*COMMON_CONTROLLERS, workload_simulator.run, endpointslice_controller.run],
        fixed_uids={("", "namespaces", "", "kube-system"): stable_uid(name, "kube-system")},
        # The simulated kubelets' container logs and streams (exec, attach, port-forward).
        subresources=[
            ("", "pods", "log", lambda storage, knobs: PodLogs(storage, knobs.log_line_interval)),
            ("", "pods", "exec", lambda storage, _knobs: streams(storage).exec),
            ("", "pods", "attach", lambda storage, _knobs: streams(storage).attach),
            ("", "pods", "portforward", lambda storage, _knobs: streams(storage).portforward),
        ],
        metrics_server=True,
    )


def karmada_profile(name: str = "karmada", *, all_crds: bool = False) -> Profile:
    """`all_crds`: install every CRD Karmada publishes (policy, work, config, networking), as a
    control plane built on them needs; by default only the kinds the agent uses."""
    from emulator.karmada_types import cluster_resource_type

    return Profile(
        name="karmada",
        types=[cluster_resource_type()],
        seed=functools.partial(seed_karmada, all_crds=all_crds),
        controllers=[
            *COMMON_CONTROLLERS,
            cluster_controller.run,
            agent_csr_approver.run,
            bootstrap_signer.run,
            bootstrap_signer.run_token_cleaner,
        ],
        fixed_uids={("", "namespaces", "", "kube-system"): stable_uid(name, "kube-system")},
    )


def profile_by_name(profile: str, name: str, *, all_crds: bool = False) -> Profile:
    if all_crds and profile != "karmada":
        raise ValueError("all_crds is an option of the karmada profile")
    if profile == "member":
        return member_profile(name)
    if profile == "karmada":
        return karmada_profile(name, all_crds=all_crds)
    raise ValueError(f"unknown profile {profile!r}: expected member or karmada")
