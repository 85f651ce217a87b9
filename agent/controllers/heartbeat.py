"""The heartbeat: the Lease karmada-cluster/<cluster> on the control plane, renewed every
--cluster-lease-duration x --cluster-lease-renew-interval-fraction.

karmada-controller-manager judges a Pull cluster alive by this Lease's renewTime advancing, so
it runs on its own schedule, independent of the status loop (a slow member must not stop the
heartbeat). As upstream (component-helpers' lease controller plus karmada's owner hook): the
Lease is created when missing, holderIdentity is the cluster name, a failed update is retried a
few times with capped backoff, and an ownerReference to the Cluster is added when absent, so the
Lease goes away with the Cluster. Like upstream's lease controller, a renewal is one PUT built
from the Lease the previous renewal returned; the Lease is read again only after a failed write
(a conflict, or the Lease deleted), so an idle agent's only control-plane request is this PUT.

Unlike upstream, renewTime is the control plane's time (agent.kube.clock.ServerClock, from the
Date of its answers), not the agent's wall clock, and it never goes backwards:
karmada-controller-manager counts a renewal only when renewTime moves forward, so an agent whose
clock is minutes off, or is set right while it runs, neither fakes a stale Lease nor flaps the
Cluster's Ready condition. (The agent's wall clock is used only while the control plane has
not answered yet.)
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Callable
from typing import Any

from agent.karmada.cluster import cluster_owner_reference
from agent.karmada.names import CLUSTER_LEASE_NAMESPACE
from agent.kube.backoff import Backoff
from agent.kube.client import KubeClient
from agent.kube.clock import REAL_CLOCK, Clock, ServerClock
from agent.kube.errors import ConflictError, KubeError, NotFoundError
from agent.kube.reachability import is_unreachable
from agent.kube.resources import LEASES
from agent.logs import get_logger
from agent.periodic import Periodic
from agent.resources import CLUSTERS
from agent.sources.link import ControlPlaneLink
from agent.timefmt import micro_time, parse_time

log = get_logger(__name__)

JsonDict = dict[str, Any]
MAX_UPDATE_RETRIES = 5
MAX_BACKOFF = 7.0
INITIAL_BACKOFF = 0.2


class Heartbeat:
    """Renews the cluster Lease; `renew_once` is one heartbeat, `start`/`stop` schedule it."""

    name = "heartbeat"

    def __init__(
        self,
        karmada: KubeClient,
        cluster_name: str,
        *,
        lease_duration: float,
        renew_interval: float,
        namespace: str = CLUSTER_LEASE_NAMESPACE,
        clock: Clock = REAL_CLOCK,
        wall_clock: Callable[[], datetime.datetime] | None = None,
        server_clock: ServerClock | None = None,
        link: ControlPlaneLink | None = None,
        on_renewed: Callable[[], None] | None = None,
    ) -> None:
        self.karmada = karmada
        self.cluster_name = cluster_name
        self.namespace = namespace
        self.lease_duration_seconds = max(1, round(lease_duration))
        self.renew_interval = renew_interval
        self._clock = clock
        self._wall = wall_clock or (lambda: datetime.datetime.now(datetime.UTC))
        self.server_clock = server_clock or karmada.transport.server_clock
        self._owner: JsonDict | None = None
        # The Lease as the last successful write returned it; None: read it first.
        self._latest: JsonDict | None = None
        self._periodic: Periodic | None = None
        self.renewals = 0
        # Told of every renewal, with the renewTime the Lease had when it was last read.
        self.link = link
        self._read_renew_time: object = None
        # Told of every renewal (the heartbeat's metric).
        self.on_renewed = on_renewed

    @property
    def running(self) -> bool:
        return self._periodic is not None and self._periodic.running

    async def start(self) -> None:
        if self._periodic is not None:
            return
        self._periodic = Periodic(
            f"heartbeat-{self.cluster_name}",
            self._tick,
            self.renew_interval,
            # Small jitter: the renew interval is already a fraction of the lease duration.
            jitter=min(1.0, self.renew_interval * 0.04),
            clock=self._clock,
        )
        await self._periodic.start()
        log.info(
            "heartbeat started: Lease %s/%s every %.1fs",
            self.namespace,
            self.cluster_name,
            self.renew_interval,
        )

    async def stop(self) -> None:
        periodic, self._periodic = self._periodic, None
        if periodic is not None:
            await periodic.stop(timeout=5.0)

    async def _owner_reference(self) -> JsonDict | None:
        if self._owner is None:
            try:
                # Its name and uid are all the reference needs (the whole Cluster is large).
                cluster = await self.karmada.get(CLUSTERS, self.cluster_name, metadata_only=True)
            except KubeError as exc:
                log.info(
                    "heartbeat: cannot read Cluster %s for the owner: %s", self.cluster_name, exc
                )
                return None
            self._owner = cluster_owner_reference(cluster)
        return self._owner

    def _spec(self, lease: JsonDict | None = None) -> JsonDict:
        return {
            "holderIdentity": self.cluster_name,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "renewTime": micro_time(self._renew_time(lease)),
        }

    def _renew_time(self, lease: JsonDict | None) -> datetime.datetime:
        """The control plane's time now, and later than the Lease's renewTime."""
        server = self.server_clock.now()
        if server is None:
            moment = self._wall()
        else:
            moment = datetime.datetime.fromtimestamp(server, datetime.UTC)
        previous = parse_time(((lease or {}).get("spec") or {}).get("renewTime"))
        if previous is not None and moment <= previous:
            moment = previous + datetime.timedelta(microseconds=1)
        return moment

    async def _tick(self) -> None:
        with contextlib.suppress(KubeError):  # renew_once logged it; the next tick retries
            await self.renew_once()

    async def renew_once(self) -> JsonDict:
        """Create or renew the Lease; retries updates with capped exponential backoff."""
        backoff = Backoff(initial=INITIAL_BACKOFF, cap=MAX_BACKOFF, jitter=0.0)
        last_error: KubeError | None = None
        for attempt in range(MAX_UPDATE_RETRIES):
            try:
                lease = await self._renew()
            except KubeError as exc:
                last_error = exc
                if attempt + 1 < MAX_UPDATE_RETRIES:
                    if not isinstance(exc, ConflictError):
                        log.info("heartbeat: renewing Lease failed (%s); retrying", exc)
                    await self._clock.sleep(backoff.next())
                continue
            self.renewals += 1
            if self.on_renewed is not None:
                self.on_renewed()
            if self.link is not None:
                self.link.renewed(self._read_renew_time)
            self._read_renew_time = None
            return lease
        assert last_error is not None
        # An unreachable control plane is reported once by its Reachability.
        log.log(
            logging.INFO if is_unreachable(last_error) else logging.WARNING,
            "heartbeat: Lease %s/%s not renewed after %d attempts: %s",
            self.namespace,
            self.cluster_name,
            MAX_UPDATE_RETRIES,
            last_error,
        )
        raise last_error

    async def _renew(self) -> JsonDict:
        owner = await self._owner_reference()
        lease = self._latest
        self._latest = None  # kept only when this write succeeds
        if lease is None:
            try:
                lease = await self.karmada.get(LEASES, self.cluster_name, namespace=self.namespace)
                self._read_renew_time = (lease.get("spec") or {}).get("renewTime")
            except NotFoundError:
                meta: JsonDict = {"name": self.cluster_name, "namespace": self.namespace}
                if owner is not None:
                    meta["ownerReferences"] = [owner]
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": meta,
                    "spec": self._spec(),
                }
                created = await self.karmada.create(LEASES, body, namespace=self.namespace)
                self._latest = created
                return created
        meta = dict(lease.get("metadata") or {})
        references = list(meta.get("ownerReferences") or [])
        if owner is not None and not any(
            ref.get("kind") == "Cluster" and ref.get("uid") == owner["uid"] for ref in references
        ):
            references.append(owner)
            meta["ownerReferences"] = references
        spec = {**(lease.get("spec") or {}), **self._spec(lease)}
        updated = {**lease, "metadata": meta, "spec": spec}
        renewed = await self.karmada.replace(LEASES, updated, namespace=self.namespace)
        self._latest = renewed
        return renewed
