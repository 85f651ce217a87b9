"""How much of one relayed connection's traffic towards the control plane may be on its way at
once: DATA packets handed to the shared gRPC call (agent.tunnel.grpc_call) and not yet written.

With one packet at a time, the next read from the member waited for the call's writer to take
the previous packet, so the member, the relay and the call took turns instead of working at
once (the konnectivity agent queues up to 150 packets per connection). A window in bytes lets
the relay read on while earlier packets go out, and keeps each connection's share of the
agent's memory bounded: the relay hands more only while fewer than `limit` bytes are in flight,
so at most `limit` plus one hand-over are. One window may also be shared by several connections
(every connection of one call). A write that failed (the call ended) is reported by the next
`admit`.
"""

from __future__ import annotations

import asyncio


class SendWindow:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self._sizes: dict[asyncio.Future[None], int] = {}
        self._waiting: list[asyncio.Future[None]] = []
        self._error: BaseException | None = None

    @property
    def has_room(self) -> bool:
        return self.in_flight < self.limit

    async def admit(self) -> None:
        """Wait until fewer than `limit` bytes are in flight; raise what a failed write raised."""
        while True:
            if self._error is not None:
                raise self._error
            if self.has_room:
                return
            opened = asyncio.get_running_loop().create_future()
            self._waiting.append(opened)
            try:
                await opened
            finally:
                if opened in self._waiting:  # cancelled while it waited
                    self._waiting.remove(opened)

    def track(self, written: asyncio.Future[None], size: int) -> None:
        """`size` bytes in flight until `written` is done (or cancelled: withdrawn)."""
        self.in_flight += size
        self._sizes[written] = size
        written.add_done_callback(self._written)

    def withdraw(self) -> None:
        """Cancel what is in flight: the call drops what it has not begun to write."""
        for written in list(self._sizes):
            written.cancel()

    def _written(self, written: asyncio.Future[None]) -> None:
        self.in_flight -= self._sizes.pop(written, 0)
        if not written.cancelled() and (error := written.exception()) is not None:
            self._error = self._error or error
        waiting, self._waiting = self._waiting, []
        for opened in waiting:  # each looks again: one write may make room for several
            if not opened.done():
                opened.set_result(None)
