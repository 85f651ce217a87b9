"""The agent's controllers by upstream name, each a module exposing `build(ctx) -> Runnable`.

Modules are imported only when their controller is enabled, so a controller that is not in this
build never stops the others from starting.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agent.context import AgentContext, Runnable
from agent.logs import get_logger

log = get_logger(__name__)

Builder = Callable[[AgentContext], Runnable]

# Upstream name -> module, in the order the manager starts them: clusterStatus first (the
# heartbeat and the Ready condition matter most), then execution before workStatus.
CONTROLLER_MODULES: dict[str, str] = {
    "clusterStatus": "agent.controllers.cluster_status",
    "execution": "agent.controllers.execution",
    "workStatus": "agent.controllers.work_status",
    "certRotation": "agent.controllers.cert_rotation",
    "serviceExport": "agent.controllers.service_export",
    "endpointsliceCollect": "agent.controllers.endpointslice_collect",
}


@dataclass(frozen=True)
class Selection:
    builders: dict[str, Builder]
    unavailable: dict[str, str]  # name -> why it could not be loaded


def load_builders(enabled: Iterable[str]) -> Selection:
    """Builders of the enabled controllers, in start order; logs what cannot be started."""
    wanted = set(enabled)
    builders: dict[str, Builder] = {}
    unavailable: dict[str, str] = {}
    for name, module_name in CONTROLLER_MODULES.items():
        if name not in wanted:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            unavailable[name] = "not part of this build"
            log.error("controller %s is enabled but not available in this build", name)
            continue
        builder = getattr(module, "build", None)
        if not callable(builder):
            unavailable[name] = f"{module_name} has no build(ctx)"
            log.error("controller %s: %s has no build(ctx)", name, module_name)
            continue
        builders[name] = builder
    return Selection(builders=builders, unavailable=unavailable)
