"""Kubernetes Events about objects (core/v1), emitted in the background.

`emit()` never blocks and never raises: it hands the write to a background task and returns.
Identical events (same object, type, reason and message) seen again within `aggregate_window`
bump `count` and `lastTimestamp` of the Event already written (a merge PATCH) instead of creating
a new one; and, as client-go's event aggregator, once `aggregate_max` different messages were
seen for the same object, type and reason within the window, further ones become a single
"(combined from similar events): <latest message>" Event whose count grows. This is client-go's
event correlator, without its per-object spam filter.

A series to write waits in a FIFO queue, once however often it is emitted meanwhile (its write
then sends the count reached). Up to `writers` writer tasks drain the queue, started when a
series is queued and ending when it is empty: a waiting write costs a place in the queue, not a
task (a burst queues thousands, whose tasks, allocated and freed among the caches growing
meanwhile, left the process's heap fragmented), and an idle agent holds no writer. At most
`max_in_flight` series wait or are written at once; beyond that, events are dropped: Events are
a diagnostic aid, never a reason to slow reconciles. Events dropped or not written are logged
without a line each: the first at once, then one line a minute with the count. (client-go's
broadcaster drops too, without a word, once 1000 Events wait for its API writer: upstream's
agent emitted 5.5 Events per Work in a 300-Work burst with its limits lifted and wrote 4.6. A
write here stands for every occurrence of its series emitted meanwhile, so a burst queues
fewer writes than it emits Events.)

The agent gives the emitter a client that spends the control plane's QPS budget
(--kube-api-qps), as upstream's event client does (Karmada gives the rest config one rate
limiter, which every client built from it shares), but only its spare tokens
(`Transport.background`), and each is sent after the other requests in flight: Events never
delay a status write; after a burst they follow at the budget's rate. Once more than half of
`max_in_flight` series wait, they no longer yield to the others (they would soon be dropped).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from agent.kube.client import KubeClient
from agent.kube.errors import AlreadyExistsError, ForbiddenError, KubeError, NotFoundError
from agent.kube.reachability import is_unreachable
from agent.kube.resources import EVENTS
from agent.kube.tasks import background
from agent.kube.transport import yielding_until
from agent.logs import get_logger
from agent.timefmt import rfc3339

log = get_logger(__name__)

JsonDict = dict[str, Any]
EventType = Literal["Normal", "Warning"]

# Events of cluster-scoped objects live in "default", as client-go puts them.
CLUSTER_SCOPED_EVENT_NAMESPACE = "default"
# client-go's EventAggregator: prefix and how many different messages before combining.
COMBINED_PREFIX = "(combined from similar events): "
DEFAULT_AGGREGATE_MAX = 10
# Longer messages are cut: the API server refuses very long Event messages, and an Event that
# is refused tells nobody anything.
MAX_MESSAGE_LENGTH = 1024


def _truncate(message: str) -> str:
    if len(message) <= MAX_MESSAGE_LENGTH:
        return message
    return message[: MAX_MESSAGE_LENGTH - 3] + "..."


@dataclass(slots=True)
class _Series:
    """One Event object on the server and how many occurrences it should show. What its
    create sends is built when it is written (`EventEmitter._body`): up to `cache_size` series
    are kept, and a whole Event body each was most of what they held."""

    name: str
    namespace: str
    involved: JsonDict
    type_: str
    reason: str
    component: str
    first_timestamp: str
    count: int = 1
    written: int = 0
    created: bool = False
    last_seen: float = 0.0
    last_timestamp: str = ""
    # The latest message (an aggregate series shows the latest of the similar events).
    message: str = ""
    # In the write queue or being written: a new occurrence only raises `count`.
    queued: bool = False


@dataclass(slots=True)
class _Similar:
    """Messages seen for one (object, type, reason) within the aggregation window."""

    started: float
    messages: set[str] = field(default_factory=set)


class _Unwritten:
    """Events that could not be written, told in the log without a line per Event (a burst
    of thousands would flood it): the first of a kind at once, then at most one line per
    `interval` with how many more there were, the last one's details, and the rest at stop."""

    def __init__(self, monotonic: Callable[[], float], interval: float) -> None:
        self._monotonic = monotonic
        self.interval = interval
        # what -> (count since the last line, level, the latest one's fields)
        self._pending: dict[str, tuple[int, int, dict[str, Any]]] = {}
        self._next_line: dict[str, float] = {}

    def note(self, what: str, level: int, **fields: Any) -> None:
        now = self._monotonic()
        count = self._pending.get(what, (0, level, fields))[0] + 1
        self._pending[what] = (count, level, fields)
        if now >= self._next_line.get(what, float("-inf")):
            self._say(what)
            self._next_line[what] = now + self.interval

    def flush(self) -> None:
        for what in list(self._pending):
            self._say(what)

    def _say(self, what: str) -> None:
        count, level, fields = self._pending.pop(what)
        log.log(level, what, **fields, **({"events": count} if count > 1 else {}))


@dataclass(frozen=True, slots=True)
class _Key:
    involved: tuple[str, str, str, str, str]
    type_: str
    reason: str
    message: str


class EventEmitter:
    def __init__(
        self,
        client: KubeClient,
        component: str = "karmada-agent",
        *,
        sources: Mapping[str, str] | None = None,
        host: str = "",
        # A 300-Work burst emits about 1,350 Events before the first is written: 1000 (as
        # client-go's broadcaster queue) dropped 3.5 % of them. A waiting write is a place in a
        # queue.
        max_in_flight: int = 4096,
        writers: int = 2,
        aggregate_window: float = 600.0,
        aggregate_max: int = DEFAULT_AGGREGATE_MAX,
        cache_size: int = 4096,
        unwritten_log_interval: float = 60.0,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.component = component
        # The component emitting each reason (upstream's controllers name themselves), the
        # default `component` for the others.
        self.sources: Mapping[str, str] = sources or {}
        self.host = host
        self.max_in_flight = max_in_flight
        # Requests at once: client-go's broadcaster writes Events one after another; a couple
        # at a time keeps up with a burst without opening a connection per queued Event.
        self.writers = max(writers, 1)
        self.aggregate_window = aggregate_window
        self.aggregate_max = aggregate_max
        self._similar: OrderedDict[tuple[tuple[str, ...], str, str], _Similar] = OrderedDict()
        self.cache_size = cache_size
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        self._series: OrderedDict[_Key, _Series] = OrderedDict()
        # Series waiting for a writer, in the order they were queued; and the writer tasks.
        self._queue: deque[_Series] = deque()
        self._writing = 0
        self._writer_tasks: set[asyncio.Task[None]] = set()
        self._stopped = False
        self.dropped = 0
        # Namespaces where writing Events was refused, said once each (an install whose RBAC
        # predates Events on resource templates); writes there are still tried.
        self._forbidden: set[str] = set()
        self._unwritten = _Unwritten(monotonic, unwritten_log_interval)
        self._stamped: tuple[int, str] = (-1, "")

    # --- public --------------------------------------------------------------------------------

    def emit(self, involved: JsonDict, type_: EventType, reason: str, message: str) -> None:
        """Record an Event about `involved` (a full object: apiVersion, kind and metadata)."""
        try:
            self._emit(involved, type_, reason, message)
        except Exception:
            log.exception("event not emitted", reason=reason)

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until no series waits or is being written (the writers have ended); False if
        `timeout` passed."""
        deadline = None if timeout is None else self._monotonic() + timeout
        while self._writer_tasks:
            remaining = None if deadline is None else max(deadline - self._monotonic(), 0.0)
            _, pending = await asyncio.wait(set(self._writer_tasks), timeout=remaining)
            if pending and deadline is not None and self._monotonic() >= deadline:
                return False
        return True

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop taking events; give the queued writes `timeout` seconds, then cancel them."""
        self._stopped = True
        if not await self.flush(timeout):
            for task in list(self._writer_tasks):
                task.cancel()
            await asyncio.gather(*self._writer_tasks, return_exceptions=True)
            self._queue.clear()
        self._unwritten.flush()

    # --- internals -----------------------------------------------------------------------------

    def _emit(self, involved: JsonDict, type_: EventType, reason: str, message: str) -> None:
        if self._stopped:
            return
        meta = involved.get("metadata") or {}
        reference = {
            "apiVersion": str(involved.get("apiVersion") or ""),
            "kind": str(involved.get("kind") or ""),
            "namespace": str(meta.get("namespace") or ""),
            "name": str(meta.get("name") or ""),
            "uid": str(meta.get("uid") or ""),
            "resourceVersion": str(meta.get("resourceVersion") or ""),
        }
        if not reference["name"]:
            log.warning("event not emitted: the object has no name", reason=reason)
            return
        message = _truncate(message)
        involved_key = (
            reference["apiVersion"],
            reference["kind"],
            reference["namespace"],
            reference["name"],
            reference["uid"],
        )
        now_mono, now_wall = self._monotonic(), self._wall_clock()
        key = _Key(involved_key, type_, reason, message)
        if self._combine(involved_key, type_, reason, message, now_mono):
            message = _truncate(COMBINED_PREFIX + message)
            key = _Key(involved_key, type_, reason, COMBINED_PREFIX)
        stamp = self._stamp(now_wall)
        series = self._series.get(key)
        if series is None or now_mono - series.last_seen > self.aggregate_window:
            series = self._new_series(reference, type_, reason, message, now_wall, stamp)
            self._series[key] = series
        else:
            series.count += 1
        series.message = message
        series.last_seen = now_mono
        series.last_timestamp = stamp
        self._series.move_to_end(key)
        while len(self._series) > self.cache_size:
            self._series.popitem(last=False)
        if series.queued:
            return
        if self._backlog() >= self.max_in_flight:
            self.dropped += 1
            self._unwritten.note(
                "events dropped: too many event writes in flight",
                logging.WARNING,
                reason=reason,
            )
            return
        series.queued = True
        self._queue.append(series)
        # A writer that found the queue empty is done at once but leaves the set a loop turn
        # later: it must not count.
        if sum(not task.done() for task in self._writer_tasks) < self.writers:
            task = background(self._drain(), name="event writer")
            self._writer_tasks.add(task)
            task.add_done_callback(self._writer_tasks.discard)

    def _backlog(self) -> int:
        """Series waiting for a writer or being written."""
        return len(self._queue) + self._writing

    def _combine(
        self, involved: tuple[str, ...], type_: str, reason: str, message: str, now: float
    ) -> bool:
        """client-go's EventAggregator: True once `aggregate_max` different messages were seen
        for this object, type and reason within the window."""
        key = (involved, type_, reason)
        similar = self._similar.get(key)
        if similar is None or now - similar.started > self.aggregate_window:
            similar = _Similar(started=now)
            self._similar[key] = similar
        self._similar.move_to_end(key)
        while len(self._similar) > self.cache_size:
            self._similar.popitem(last=False)
        similar.messages.add(message)
        if len(similar.messages) < self.aggregate_max:
            return False
        similar.messages.discard(message)  # keep the set bounded, as client-go does
        return True

    def _stamp(self, now_wall: float) -> str:
        """metav1.Time of `now_wall`, formatted once a second (a burst emits thousands)."""
        second = int(now_wall)
        if second != self._stamped[0]:
            self._stamped = (second, rfc3339(datetime.fromtimestamp(second, UTC)))
        return self._stamped[1]

    def _new_series(
        self,
        reference: JsonDict,
        type_: str,
        reason: str,
        message: str,
        now_wall: float,
        stamp: str,
    ) -> _Series:
        namespace = reference["namespace"] or CLUSTER_SCOPED_EVENT_NAMESPACE
        name = f"{reference['name']}.{int(now_wall * 1e9):x}"
        return _Series(
            name=name,
            namespace=namespace,
            involved={k: v for k, v in reference.items() if v},
            type_=type_,
            reason=reason,
            component=self.sources.get(reason, self.component),
            first_timestamp=stamp,
            last_timestamp=stamp,
            message=message,
        )

    def _body(self, series: _Series) -> JsonDict:
        """The Event a create of `series` sends (its count, last timestamp and message now)."""
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": series.name, "namespace": series.namespace},
            "involvedObject": series.involved,
            "reason": series.reason,
            "message": series.message,
            "type": series.type_,
            "source": {
                "component": series.component,
                **({"host": self.host} if self.host else {}),
            },
            "firstTimestamp": series.first_timestamp,
            "lastTimestamp": series.last_timestamp,
            "count": series.count,
            "reportingComponent": series.component,
            "reportingInstance": self.host,
        }

    async def _drain(self) -> None:
        """One writer: write the queued series, oldest first, until none is left."""
        # Once writes yielding to status writes fell far behind, they go beside them rather
        # than be dropped at max_in_flight.
        with yielding_until(lambda: self._backlog() > self.max_in_flight // 2):
            while self._queue:
                series = self._queue.popleft()
                self._writing += 1
                try:
                    await self._write(series)
                finally:
                    self._writing -= 1
                    series.queued = False

    async def _write(self, series: _Series) -> None:
        """Bring the server's Event up to `series.count`, occurrences emitted meanwhile too."""
        attempts = 0
        while series.written != series.count and attempts < 3:
            attempts += 1
            target, stamp = series.count, series.last_timestamp
            try:
                if not series.created:
                    body = {**self._body(series), "count": target, "lastTimestamp": stamp}
                    await self.client.create(EVENTS, body, namespace=series.namespace)
                    series.created = True
                else:
                    # As client-go: count, lastTimestamp and the (latest) message.
                    await self.client.patch(
                        EVENTS,
                        series.name,
                        {"count": target, "lastTimestamp": stamp, "message": series.message},
                        patch_type="merge",
                        namespace=series.namespace,
                    )
                series.written = target
                attempts = 0
                self._forbidden.discard(series.namespace)
            except NotFoundError:
                if not series.created:
                    # A create's 404: the namespace does not exist (a resource template's, gone
                    # or never there). The server rejected the Event; as client-go, not retried.
                    self._unwritten.note(
                        "events not written: their namespace does not exist",
                        logging.INFO,
                        namespace=series.namespace,
                        reason=series.reason,
                    )
                    return
                # Deleted meanwhile (Events expire): start a new one with the total count.
                series.created = False
            except AlreadyExistsError:
                series.created = True
            except ForbiddenError as exc:
                if series.namespace not in self._forbidden:
                    self._forbidden.add(series.namespace)
                    log.warning(
                        "events not written in this namespace: permission denied (the agent's "
                        "RBAC lacks create/patch on events here; said once per namespace)",
                        namespace=series.namespace,
                        reason=series.reason,
                        error=str(exc),
                    )
                return
            except KubeError as exc:
                # An unreachable control plane is reported once, by its Reachability.
                self._unwritten.note(
                    "events not written",
                    logging.INFO if is_unreachable(exc) else logging.WARNING,
                    reason=series.reason,
                    namespace=series.namespace,
                    error=str(exc),
                )
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("event not written", reason=series.reason)
                return
