"""The reconcile loop: N workers take keys from a WorkQueue and call `reconcile(key)`.

Level-based, as controller-runtime: success forgets the key's failure history (and requeues it
after `Result.requeue_after` if asked), an exception requeues it rate-limited, `TerminalError`
drops it. No exception ever ends a worker. `stop()` stops taking keys and waits, within a bound,
for the reconciles in flight.

Each reconcile runs with its log fields bound in the context (structlog's contextvars): a
reconcile id, and what `log_context` says of the key (a Work's name), so that every line logged
while it runs, by whatever module, carries them (agent.logs).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from agent.kube.errors import KubeError
from agent.kube.workqueue import QueueShutDownError, WorkQueue
from agent.logs import bound_contextvars, get_logger

log = get_logger(__name__)

T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class Result:
    """`requeue_after` (seconds) re-adds the key after that delay; `requeue` re-adds it
    rate-limited without counting it as an error."""

    requeue_after: float | None = None
    requeue: bool = False


class TerminalError(Exception):
    """Raised by a reconcile to report an error that retrying cannot fix."""


class RetryableError(Exception):
    """An expected failure of a reconcile whose message says what is wrong: retried with
    backoff and logged without a traceback (tracebacks are kept for bugs)."""


class ControllerMetrics(Protocol):
    """controller-runtime's controller metrics: reconcile totals by result, errors, time, the
    worker count and the workers busy. `result` is one of success, requeue, requeue_after,
    error, terminal_error, panic (an exception of an unexpected type: a bug)."""

    def controller_started(self, controller: str, workers: int) -> None: ...

    def worker_active(self, controller: str, delta: int) -> None: ...

    def reconcile(self, controller: str, result: str, seconds: float) -> None: ...


Reconcile = Callable[[T], Awaitable[Result | None]]
# The log fields of a reconcile of the key (agent.logs.RECONCILE_FIELDS).
LogContext = Callable[[T], Mapping[str, object]]


class Controller(Generic[T]):
    def __init__(
        self,
        name: str,
        queue: WorkQueue[T],
        reconcile: Reconcile[T],
        *,
        workers: int = 1,
        metrics: ControllerMetrics | None = None,
        log_context: LogContext[T] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.name = name
        self.queue = queue
        self._reconcile = reconcile
        self.workers = workers
        self._metrics = metrics
        self._log_context = log_context
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()

    @property
    def running(self) -> bool:
        return any(not t.done() for t in self._tasks)

    def start(self) -> None:
        """Start the workers in the background (see `run` to await them instead)."""
        if self._tasks:
            return
        if self._metrics is not None:
            self._metrics.controller_started(self.name, self.workers)
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
            for i in range(self.workers)
        ]

    async def run(self) -> None:
        """Start the workers and wait until they end (after `stop`, or cancellation)."""
        self.start()
        try:
            await asyncio.gather(*self._tasks)
        except asyncio.CancelledError:
            for task in self._tasks:
                task.cancel()
            raise

    async def stop(self, timeout: float = 30.0) -> bool:
        """Stop taking keys and wait up to `timeout` for in-flight reconciles; those still
        running then are cancelled. Returns True if everything finished in time."""
        self.queue.shutdown()
        if not self._tasks:
            return True
        try:
            _, pending = await asyncio.wait(self._tasks, timeout=timeout)
        except asyncio.CancelledError:
            # The stop itself was abandoned (its caller's bound ran out): abandon the reconciles
            # in flight too rather than leave them running unsupervised.
            for task in self._tasks:
                task.cancel()
            raise
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            log.warning("%s: %d reconciles cancelled at stop", self.name, len(pending))
        return not pending

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDownError:
                return
            try:
                await self._process(key)
            finally:
                self.queue.done(key)

    async def _process(self, key: T) -> None:
        fields = self._log_context(key) if self._log_context is not None else {}
        with bound_contextvars(reconcile_id=str(uuid.uuid4()), **fields):
            await self._reconcile_logged(key)

    async def _reconcile_logged(self, key: T) -> None:
        started = time.monotonic()
        outcome = "success"
        if self._metrics is not None:
            self._metrics.worker_active(self.name, 1)
        try:
            result = await self._reconcile(key)
        except asyncio.CancelledError:
            raise
        except TerminalError as exc:
            outcome = "terminal_error"
            self.queue.forget(key)
            log.error("%s: reconcile of %s failed for good: %s", self.name, key, exc)
        except Exception as exc:
            outcome = "error" if isinstance(exc, KubeError | RetryableError) else "panic"
            self.queue.add_rate_limited(key)
            log.warning(
                "%s: reconcile of %s failed (requeue %d): %s",
                self.name,
                key,
                self.queue.num_requeues(key),
                exc,
                exc_info=not isinstance(exc, KubeError | RetryableError),
            )
        else:
            if result is not None and result.requeue_after is not None:
                outcome = "requeue_after"
                self.queue.forget(key)
                self.queue.add_after(key, result.requeue_after)
            elif result is not None and result.requeue:
                outcome = "requeue"
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
        finally:
            if self._metrics is not None:
                self._metrics.worker_active(self.name, -1)
        if self._metrics is not None:
            self._metrics.reconcile(self.name, outcome, time.monotonic() - started)
