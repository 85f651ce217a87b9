"""The sources of an agent that cannot reach the control plane: its Works from the durable
record on the member (agent.sources.work_records) instead of the control plane's watch, and a
Cluster that the member alone stands for.

Status written while offline is queued per Work (the last write wins, merged by key) and sent
by `RecordedWorks.report`, one merge patch per Work, once the link returns.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from agent.karmada.status import status_of
from agent.kube.client import KubeClient
from agent.kube.errors import KubeError, NotFoundError
from agent.logs import get_logger
from agent.resources import WORKS

from .cluster import ClusterInformer
from .works import WorkInformer

log = get_logger(__name__)

JsonDict = dict[str, Any]
REPORT_CONCURRENCY = 8
# How long the report waits for the control plane's Works to be listed before it writes the
# queued status without knowing what the control plane holds.
REPORT_SYNC_TIMEOUT = 60.0


class _NotWatched:
    """A source that needs no watch: always synced, nothing to start or stop."""

    @property
    def synced(self) -> bool:
        return True

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def wait_synced(self, timeout: float | None = None) -> bool:
        return True


class RecordedWorks(_NotWatched, WorkInformer):
    """The recorded Works in place of the control plane's list+watch; status writes queued."""

    def __init__(self, client: KubeClient, namespace: str, works: list[JsonDict]) -> None:
        super().__init__(client, namespace, name="recorded works")
        self.reflector.seed(works)
        self.queued: dict[str, JsonDict] = {}

    async def patch_status(
        self, work: JsonDict, status: JsonDict, *, precondition: bool = False
    ) -> JsonDict:
        # Queued and merged with what follows: written later as one patch, no precondition.
        name = str((work.get("metadata") or {}).get("name"))
        self.queued.setdefault(name, {}).update(copy.deepcopy(status))
        updated = {**work, "status": {**status_of(work), **copy.deepcopy(status)}}
        self.reflector.update_seeded(updated)
        return updated

    async def report(self, karmada: KubeClient, into: WorkInformer | None = None) -> int:
        """Send the queued status, one merge patch per Work, a few at a time (over a slow link
        one after the other costs a round trip per Work); returns the writes made. `into`: the
        control plane's Works as the registered controllers will read them; once listed, each
        write goes through it, so that they start knowing what was reported (the watch's echo
        of it may be seconds behind over a slow link) instead of writing it again; a Work
        that already has the queued status there is not written (the record keeps the status
        of the Work's last apply, so what the offline controllers queue is often what the
        control plane was told since). The report waits for that list (at most
        REPORT_SYNC_TIMEOUT): written before it, every queued status went out blind, the
        unchanged Works' among them (the registered controllers wait for the list anyway)."""
        listed = into is None or into.synced or not self.queued
        if not listed and into is not None and not await into.wait_synced(REPORT_SYNC_TIMEOUT):
            log.warning(
                "the control plane's Works not listed yet; the queued status written "
                "without comparing",
                works=len(self.queued),
            )
        limit = asyncio.Semaphore(REPORT_CONCURRENCY)

        async def write(name: str, status: JsonDict) -> int:
            async with limit:
                try:
                    known = into.get(name) if into is not None and into.synced else None
                    if known is not None and _holds(status_of(known), status):
                        return 0  # the control plane has it already: nothing to write
                    if known is not None and into is not None:
                        await into.patch_status(known, status)
                    else:
                        await karmada.patch(
                            WORKS,
                            name,
                            {"status": status},
                            patch_type="merge",
                            namespace=self.namespace,
                            subresource="status",
                            metadata_only=True,  # the whole Work back would only cost the link
                        )
                except NotFoundError:
                    log.info("Work gone while offline; its queued status is dropped", work=name)
                except KubeError as exc:
                    log.warning("queued Work status not reported", work=name, error=str(exc))
                else:
                    return 1
                return 0

        queued = sorted(self.queued.items())
        self.queued.clear()
        return sum(await asyncio.gather(*(write(name, status) for name, status in queued)))


def _holds(current: JsonDict, status: JsonDict) -> bool:
    """Every key of `status` (a merge patch of the status) has that value in `current`."""
    return all(current.get(key) == value for key, value in status.items())


class MemberOnlyCluster(_NotWatched, ClusterInformer):
    """The Cluster as the offline controllers see it: Ready (they only reach the member, and a
    member that does not answer fails their requests anyway), never terminating."""

    @property
    def ready(self) -> bool:
        return True

    @property
    def terminating(self) -> bool:
        return False
