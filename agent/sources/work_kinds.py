"""The member kinds the Works name, watched: a source whose member watches follow the Works
cache, so that no watch is started from inside a reconcile.

Every (apiVersion, kind) of a manifest of a Work in the cache is mapped on the member (its
RESTMapper) and the member caches of that resource started (MemberObjects.ensure), in a task
of its own. A kind the member does not serve yet (a CRD applied by the same Work) is looked at
again whenever the member's discovery is refreshed, which the apply of a CRD brings about.
An apply that comes first waits a moment for the caches of its kind (apply.py,
SelectedInformers.wait_known): they are on their way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent.karmada import collected
from agent.karmada.work import Manifest, manifests_of
from agent.kube.backoff import Backoff
from agent.kube.discovery import NoKindMatchError, RESTMapper
from agent.kube.errors import KubeError
from agent.kube.informers import SelectedInformers
from agent.kube.reflector import HandlerFuncs
from agent.kube.tasks import background, cancel_and_wait
from agent.logs import get_logger

from .works import WorkInformer

log = get_logger(__name__)

JsonDict = dict[str, Any]
Kind = tuple[str, str]  # (apiVersion, kind)


class WorkKinds:
    """Started and stopped by the controller manager, as every declared source (after the
    member objects it fills, before them)."""

    name = "member kinds of the Works"

    def __init__(self, works: WorkInformer, mapper: RESTMapper, objects: SelectedInformers) -> None:
        self.works = works
        self.mapper = mapper
        self.objects = objects
        self._named: set[Kind] = set()
        self._watched: set[Kind] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stops: list[Callable[[], None]] = []

    @property
    def pending(self) -> set[Kind]:
        """Kinds the Works name whose member watches have not been started (not served yet)."""
        return self._named - self._watched

    async def start(self) -> None:
        if self._task is not None:
            return
        self._named, self._watched = set(), set()
        self._stops = [
            self.works.add_handler(
                HandlerFuncs(add=self._note, update=self._updated, delete=lambda _work: None)
            ),
            self.mapper.on_refresh(self._wake.set),
        ]
        self._task = background(self._run(), name=self.name)

    async def stop(self) -> None:
        for stop in self._stops:
            stop()
        self._stops = []
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait([task])

    async def wait_synced(self, timeout: float | None = None) -> bool:
        return True  # not a cache: the member objects say when a kind's caches have synced

    def _updated(self, old: JsonDict, new: JsonDict) -> None:
        if old.get("spec") != new.get("spec"):
            self._note(new)

    def _note(self, work: JsonDict) -> None:
        if collected.is_suppressed(work):
            return  # never applied here
        for item in manifests_of(work):
            if isinstance(item, Manifest) and (item.api_version, item.kind) not in self._named:
                self._named.add((item.api_version, item.kind))
                self._wake.set()

    async def _run(self) -> None:
        backoff = Backoff(initial=0.5, cap=30.0)
        while True:
            await self._wake.wait()
            self._wake.clear()
            failed = False
            for api_version, kind in sorted(self.pending):
                try:
                    info = await self.mapper.resource_for(api_version, kind)
                except NoKindMatchError:
                    continue  # looked at again when discovery is refreshed
                except KubeError as exc:
                    log.warning("cannot map a kind the Works name", kind=kind, error=str(exc))
                    failed = True
                    continue
                self.objects.ensure(info.gvr, info.kind)
                self._watched.add((api_version, kind))
            if failed:
                # The member's discovery failed: retry, and again while it fails.
                await asyncio.sleep(backoff.next())
                self._wake.set()
            else:
                backoff.reset()
