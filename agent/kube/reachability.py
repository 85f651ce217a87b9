"""Whether an API server answers, as the requests to it find out.

Every request of a Transport reports here: an HTTP response of any status means the server is
reachable, a request that got no response at all (connect, TLS, reset, timeout) means it is not.
The change is logged once each way (a warning when the server becomes unreachable, an info when
it answers again) and counted, so an outage is one line, not a traceback per periodic job; the
callers that retry log their failures at a lower level (see `is_unreachable`).

With `backoff` given, while the server is unreachable, requests are admitted one per reconnect
slot (`admit`), the slots spaced by that Backoff (jitter, cap); the others fail at once without
dialling. However many
controllers, watches and retries want the server, an outage costs about one connection attempt
per slot, and the first answer opens the way for all again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable

from agent.kube.backoff import Backoff
from agent.kube.errors import TransportError
from agent.logs import get_logger

log = get_logger(__name__)


def is_unreachable(exc: BaseException) -> bool:
    """True for a failure that got no HTTP response: the Reachability of its server has
    reported the outage already."""
    return isinstance(exc, TransportError)


class Reachability:
    def __init__(
        self,
        name: str,
        *,
        on_lost: Callable[[], None] | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.name = name
        self.reachable = True
        self.outages = 0
        self.refused = 0
        self._on_lost = on_lost
        self._since = 0.0
        self._backoff = backoff
        self._next_attempt = 0.0
        # Set while reachable: those waiting out a backoff because of the outage wake up on it.
        self._back: asyncio.Event | None = None

    async def wait_answered(self) -> None:
        """Return once the server has answered since it became unreachable."""
        if self.reachable:
            return
        if self._back is None:
            self._back = asyncio.Event()
        await self._back.wait()

    def admit(self) -> float | None:
        """None: send the request. Otherwise the server is unreachable and this slot's attempt
        is taken: the seconds until the next one (the request must not dial)."""
        if self.reachable or self._backoff is None:
            return None
        now = time.monotonic()
        if now < self._next_attempt:
            self.refused += 1
            return self._next_attempt - now
        self._next_attempt = now + self._backoff.next()
        return None

    def failed(self, error: str) -> None:
        if not self.reachable:
            return
        self.reachable = False
        self.outages += 1
        self._since = time.monotonic()
        if self._backoff is not None:
            self._backoff.reset()
            self._next_attempt = self._since + self._backoff.next()
        log.warning("%s unreachable: %s", self.name, error)
        if self._on_lost is not None:
            self._on_lost()

    def answered(self) -> None:
        if self.reachable:
            return
        self.reachable = True
        back, self._back = self._back, None
        if back is not None:
            back.set()
        log.info("%s reachable again after %.0fs", self.name, time.monotonic() - self._since)


async def sleep_unless_answered(
    seconds: float,
    reachabilities: Iterable[Reachability],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Wait `seconds`, or only until one of these servers answers again after an outage (at once
    if one has since): a retry after a failure that got no answer goes as soon as the link is
    back, not a long backoff later."""
    sleeper = asyncio.ensure_future(sleep(seconds))
    backs = [asyncio.ensure_future(r.wait_answered()) for r in reachabilities]
    try:
        await asyncio.wait({sleeper, *backs}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, *backs):
            task.cancel()
        await asyncio.gather(sleeper, *backs, return_exceptions=True)
