"""konnectivity `Packet` messages as the proxy-server test double reads and writes them.

Read with the emulator's protobuf wire reader (emulator.protobuf.iter_fields); written from the
message table below. The double keeps its own codec on purpose: the agent's (agent.tunnel.packets)
is checked against this one and against the stock proxy-server, not against itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..protobuf import iter_fields

DIAL_REQ, DIAL_RSP, CLOSE_REQ, CLOSE_RSP, DATA, DIAL_CLS, DRAIN = range(7)
NAMES = ("DIAL_REQ", "DIAL_RSP", "CLOSE_REQ", "CLOSE_RSP", "DATA", "DIAL_CLS", "DRAIN")

# type -> (Packet field of the payload, {payload field number: (name, kind)})
MESSAGES: dict[int, tuple[int, dict[int, tuple[str, str]]]] = {
    DIAL_REQ: (2, {1: ("protocol", "string"), 2: ("address", "string"), 3: ("random", "int64")}),
    DIAL_RSP: (3, {1: ("error", "string"), 2: ("connectID", "int64"), 3: ("random", "int64")}),
    DATA: (4, {1: ("connectID", "int64"), 2: ("error", "string"), 3: ("data", "bytes")}),
    CLOSE_REQ: (5, {1: ("connectID", "int64")}),
    CLOSE_RSP: (6, {1: ("error", "string"), 2: ("connectID", "int64")}),
    DIAL_CLS: (7, {1: ("random", "int64")}),
    DRAIN: (8, {}),
}


@dataclass
class Pkt:
    type: int
    fields: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        kind = next(k for n, k in MESSAGES[self.type][1].values() if n == name)
        return self.fields.get(name, {"string": "", "bytes": b"", "int64": 0}[kind])

    def __repr__(self) -> str:
        shown = {
            k: (f"<{len(v)} bytes>" if isinstance(v, bytes) else v) for k, v in self.fields.items()
        }
        return f"Pkt({NAMES[self.type]}, {shown})"


def _uvarint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, kind: str, value: Any) -> bytes:
    if kind == "int64":
        return _uvarint(number << 3) + _uvarint(int(value))
    raw = value.encode() if kind == "string" else bytes(value)
    return _uvarint(number << 3 | 2) + _uvarint(len(raw)) + raw


def encode(pkt: Pkt) -> bytes:
    payload_field, layout = MESSAGES[pkt.type]
    body = b"".join(
        _field(number, kind, pkt.fields[name])
        for number, (name, kind) in layout.items()
        if pkt.fields.get(name)
    )
    head = _field(1, "int64", pkt.type) if pkt.type else b""
    return head + _field(payload_field, "bytes", body)


def decode(raw: bytes) -> Pkt:
    kind = 0
    payload = b""
    for number, wire, value in iter_fields(raw):
        if number == 1 and wire == 0:
            kind = int(value)
        elif number >= 2 and wire == 2:
            payload = bytes(value)
    if kind not in MESSAGES:
        raise ValueError(f"unknown packet type {kind}")
    layout = MESSAGES[kind][1]
    fields: dict[str, Any] = {}
    for number, _wire, value in iter_fields(payload):
        if number not in layout:
            continue
        name, field_kind = layout[number]
        if field_kind == "int64":
            assert isinstance(value, int)
            fields[name] = value - (1 << 64) if value >= 1 << 63 else value
        elif field_kind == "string":
            fields[name] = bytes(value).decode()
        else:
            fields[name] = bytes(value)
    return Pkt(kind, fields)


def pkt(kind: int, **fields: Any) -> Pkt:
    return Pkt(kind, fields)
