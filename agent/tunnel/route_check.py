"""Whether this cluster's route answers for this agent.

The stock proxy-server gives a route name (`host=<cluster>.<domain>`) to whichever agent it
accepted first that claims it; it does not check claims against identities. A claimant cannot
pass for the cluster (the control plane verifies the route with the cluster's own tunnel CA,
whose key never leaves the member), but while it holds the route every request for the cluster
goes to it and fails (`x509: certificate signed by unknown authority`).

So the agent asks the control plane for its own cluster through the cluster proxy now and then
(GET /apis/cluster.karmada.io/v1alpha1/clusters/<name>/proxy/version, as any user would) and
looks whether the dial for it reached its own tunnel. When it did not, and the control plane
did not simply refuse the agent (no `clusters/proxy` grant: nothing can be told), the route
answers for someone else: the Cluster's condition TunnelRouteHeld turns False with what the
check saw, a Warning Event TunnelRouteClaimed is recorded on the Cluster, the gauge
karmada_agent_tunnel_route_held drops to 0, and a log line names the answer. The agent stays
registered for the route, so it takes it over when the claimant's call ends, and checks every
CLAIMED_INTERVAL until it does; then the condition turns True again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agent.events import EventEmitter
from agent.karmada.conditions import Condition, find, new_condition, set_condition
from agent.kube.client import JsonDict, KubeClient
from agent.kube.errors import ConflictError, KubeError, NotFoundError
from agent.logs import get_logger
from agent.resources import CLUSTERS
from agent.tunnel.metrics import TunnelMetrics

CONDITION = "TunnelRouteHeld"
EVENT_CLAIMED = "TunnelRouteClaimed"
EVENT_RECOVERED = "TunnelRouteRecovered"
CHECK_INTERVAL = 60.0
CLAIMED_INTERVAL = 10.0
# The answer's text kept in the condition, Event and log.
SEEN_CHARS = 300

log = get_logger(__name__)

Probe = Callable[[], Awaitable[tuple[int, str]]]
"""One request for the cluster through the control plane: (HTTP status, body text); status 0
when it could not be sent."""


@dataclass(frozen=True)
class Verdict:
    held: bool | None  # None: the check could not tell
    seen: str


class RouteCheck:
    def __init__(
        self,
        *,
        cluster: str,
        probe: Probe,
        route_dials: Callable[[], int],
        connected: Callable[[], bool],
        metrics: TunnelMetrics,
        karmada: KubeClient | None = None,
        events: EventEmitter | None = None,
        interval: float = CHECK_INTERVAL,
        claimed_interval: float = CLAIMED_INTERVAL,
    ) -> None:
        self.cluster = cluster
        self._probe = probe
        self._route_dials = route_dials
        self._connected = connected
        self._metrics = metrics
        self._karmada = karmada
        self._events = events
        self.interval = interval
        self.claimed_interval = claimed_interval
        self.last: Verdict | None = None
        self._task: asyncio.Task[None] | None = None
        self._told_cannot_check = False

    async def check(self) -> Verdict:
        if not self._connected():
            return Verdict(None, "the tunnel is not connected")
        before = self._route_dials()
        code, text = await self._probe()
        seen = f"HTTP {code}: {' '.join(text.split())[:SEEN_CHARS]}" if code else text
        if self._route_dials() > before:
            return Verdict(True, seen)
        if code in (0, 401, 403, 404, 429):
            # Not sent, or the control plane refused the agent itself: nothing to tell.
            return Verdict(None, seen)
        return Verdict(False, seen)

    async def check_and_report(self) -> Verdict:
        verdict = await self.check()
        self._metrics.route_checks.labels(
            {True: "held", False: "claimed", None: "unknown"}[verdict.held]
        ).inc()
        if verdict.held is None:
            if not self._told_cannot_check:
                self._told_cannot_check = True
                log.info("cannot check the tunnel route now", seen=verdict.seen)
            return verdict
        self._told_cannot_check = False
        self._metrics.route_held.set(1 if verdict.held else 0)
        changed = self.last is None or self.last.held != verdict.held
        news = changed or (self.last is not None and self.last.seen != verdict.seen)
        self.last = verdict
        if not verdict.held and news:
            log.warning(
                "the cluster's tunnel route answers for someone else: a request for the cluster "
                "through the control plane did not reach this agent",
                cluster=self.cluster,
                seen=verdict.seen,
            )
        elif verdict.held and changed:
            log.info("the cluster's tunnel route answers for this agent", cluster=self.cluster)
        if changed:
            await self._publish(verdict)
        return verdict

    async def _publish(self, verdict: Verdict) -> None:
        if self._karmada is None:
            return
        if verdict.held:
            condition = new_condition(
                CONDITION, "True", "AnsweredByAgent", "the cluster's route reaches its agent"
            )
        else:
            condition = new_condition(
                CONDITION,
                "False",
                "ClaimedElsewhere",
                "a request for the cluster through the control plane did not reach its agent "
                f"(another tunnel agent holds the route?); it saw: {verdict.seen}",
            )
        try:
            written = await self._write_condition(condition)
        except KubeError as exc:
            log.warning("cannot write the tunnel route condition", error=str(exc))
            return
        if self._events is None or written is None:
            return
        cluster, before = written
        if not verdict.held:
            self._events.emit(cluster, "Warning", EVENT_CLAIMED, condition["message"])
        elif before == "False":
            self._events.emit(cluster, "Normal", EVENT_RECOVERED, condition["message"])

    async def _write_condition(self, condition: Condition) -> tuple[JsonDict, str] | None:
        """The Cluster as written and the condition's status before; None without a Cluster."""
        assert self._karmada is not None
        for attempt in range(3):
            try:
                cluster = await self._karmada.get(CLUSTERS, self.cluster)
            except NotFoundError:
                return None
            status = dict(cluster.get("status") or {})
            conditions = list(status.get("conditions") or [])
            before = str((find(conditions, CONDITION) or {}).get("status", ""))
            if before == condition["status"]:
                return cluster, before
            set_condition(conditions, dict(condition))
            status["conditions"] = conditions
            try:
                written = await self._karmada.update_status(CLUSTERS, {**cluster, "status": status})
            except ConflictError:
                if attempt == 2:
                    raise
                continue
            return written, before
        return None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="tunnel-route-check")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                verdict = await self.check_and_report()
            except Exception:  # a check must never end the loop
                log.exception("tunnel route check failed")
                verdict = Verdict(None, "")
            await asyncio.sleep(self.claimed_interval if verdict.held is False else self.interval)
