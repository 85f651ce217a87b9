"""What the heartbeat learns about the link to the control plane: whether this cluster was cut
off for longer than its Lease lasts (so the control plane has seen it as gone, and may have
evicted its Works meanwhile).

The heartbeat reports every renewal. A gap between two renewals longer than the lease duration
is a long outage, remembered with the time the link came back. Gaps are measured on the agent's
own monotonic clock: between its renewals, and from its start to its first one. What happened
before this process started is told by the renewTime the Lease had when it was read (at start,
and after a failure: the last renewal of any agent of this cluster), compared with the control
plane's own clock (agent.kube.clock.ServerClock, from the Date of its answers), never with the
agent's wall clock, which may be off by minutes. The deletion guard asks `outage()`; when the
heartbeat has said nothing yet it reads the Lease once itself (`observe_lease`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.kube.clock import REAL_CLOCK, Clock
from agent.logs import get_logger
from agent.timefmt import parse_time

log = get_logger(__name__)

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class Outage:
    """A disconnection longer than the lease duration: how long it lasted, and when (on the
    agent's clock) the link was found working again; `ongoing` while not renewed yet."""

    seconds: float
    back_at: float
    ongoing: bool = False


class ControlPlaneLink:
    def __init__(
        self,
        lease_duration: float,
        *,
        clock: Clock = REAL_CLOCK,
        server_time: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.lease_duration = lease_duration
        self._clock = clock
        # The control plane's time now (seconds since the epoch), None while unknown.
        self._server_time = server_time
        try:
            self._started: float | None = clock.now()
        except RuntimeError:  # built outside the event loop: no start to measure from
            self._started = None
        self._last_renewal: float | None = None
        self._lease_seen = False
        self._outage: Outage | None = None

    @property
    def known(self) -> bool:
        """Whether a renewal or a read of the Lease has told anything yet."""
        return self._last_renewal is not None or self._lease_seen

    def renewed(self, previous_renew_time: object = None) -> None:
        """A renewal succeeded; `previous_renew_time` is the Lease's renewTime as read before
        it (None when this renewal wrote over our own previous one)."""
        now = self._clock.now()
        gaps = []
        if self._last_renewal is not None:
            gaps.append(now - self._last_renewal)
        elif self._started is not None:
            gaps.append(now - self._started)
        since = self._since(previous_renew_time)
        if since is not None:
            gaps.append(since)
        self._last_renewal = now
        self._note_gap(max(gaps, default=0.0), now)

    def observe_lease(self, lease: JsonDict | None) -> None:
        """The Lease as read by someone other than the heartbeat (None: there is none yet)."""
        self._lease_seen = True
        if lease is None:
            return
        since = self._since((lease.get("spec") or {}).get("renewTime"))
        if since is not None:
            self._note_gap(since, self._clock.now())

    def _since(self, renew_time: object) -> float | None:
        """How long ago, by the control plane's clock, the Lease was renewed at `renew_time`."""
        previous = parse_time(renew_time)
        server = self._server_time()
        if previous is None or server is None:
            return None
        return server - previous.timestamp()

    def _note_gap(self, gap: float, now: float) -> None:
        if gap > self.lease_duration:
            # Info: the outage itself is reported once, as a warning, by the Reachability.
            log.info(
                "the cluster Lease went %.0fs without renewal (lease duration %.0fs): the "
                "control plane has seen this cluster as gone",
                gap,
                self.lease_duration,
            )
            self._outage = Outage(gap, now)

    def outage(self) -> Outage | None:
        """The last long outage; while renewals are failing for longer than the lease lasts,
        an ongoing one (its `back_at` is now)."""
        now = self._clock.now()
        if self._last_renewal is not None and now - self._last_renewal > self.lease_duration:
            return Outage(now - self._last_renewal, now, ongoing=True)
        return self._outage
