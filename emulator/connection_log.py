"""Per-connection accounting of the HTTPS front: which clients hold how many connections.

Each TLS connection gets a record when it opens: its ALPN protocol (`h2` or `http/1.1`),
the peer address, and, as requests arrive on it, the users they authenticated as and how
many there were. Tests count connections per client with `count`; benchmarks read the same
records over HTTP at /_emulator/connections.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from .wire import ApiRequest, ApiResponse


@dataclass
class ConnectionRecord:
    id: int
    protocol: str
    peer: str
    opened_at: float
    closed_at: float | None = None
    requests: int = 0
    # Responses sent gzip-compressed (compression.py).
    gzipped: int = 0
    users: set[str] = field(default_factory=set)

    @property
    def open(self) -> bool:
        return self.closed_at is None

    def served(self, req: ApiRequest) -> None:
        self.requests += 1
        if req.user is not None:
            self.users.add(req.user.name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "protocol": self.protocol,
            "peer": self.peer,
            "open": self.open,
            "requests": self.requests,
            "gzipped": self.gzipped,
            "users": sorted(self.users),
        }


class ConnectionLog:
    """Every connection the front accepted since the log was last reset."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.records: list[ConnectionRecord] = []

    def opened(self, protocol: str, peer: str) -> ConnectionRecord:
        record = ConnectionRecord(next(self._ids), protocol, peer, time.monotonic())
        self.records.append(record)
        return record

    @staticmethod
    def closed(record: ConnectionRecord) -> None:
        if record.closed_at is None:
            record.closed_at = time.monotonic()

    def reset(self) -> None:
        """Forget closed connections; open ones stay, with their counters zeroed."""
        self.records = [r for r in self.records if r.open]
        for record in self.records:
            record.requests = 0
            record.gzipped = 0
            record.users.clear()

    def select(
        self, *, user: str | None = None, protocol: str | None = None, open_only: bool = False
    ) -> list[ConnectionRecord]:
        return [
            r
            for r in self.records
            if (user is None or user in r.users)
            and (protocol is None or r.protocol == protocol)
            and (not open_only or r.open)
        ]

    def count(
        self, *, user: str | None = None, protocol: str | None = None, open_only: bool = False
    ) -> int:
        """How many connections carried requests of `user` (any user if None)."""
        return len(self.select(user=user, protocol=protocol, open_only=open_only))

    async def http(self, req: ApiRequest) -> ApiResponse:
        """GET /_emulator/connections[?user=...&open=true]; DELETE resets the log."""
        if req.method == "DELETE":
            self.reset()
            return ApiResponse(204)
        records = self.select(user=req.param("user"), open_only=req.flag("open"))
        body = json.dumps({"items": [r.to_dict() for r in records]}).encode()
        return ApiResponse(200, body, {"Content-Type": "application/json"})
