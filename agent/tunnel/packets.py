"""The konnectivity `Packet` (konnectivity-client/proto/client/client.proto) on the wire.

One flat value stands for every packet type; each type uses the fields its payload message has:

    DIAL_REQ   DialRequest{protocol=1, address=2, random=3}
    DIAL_RSP   DialResponse{error=1, connectID=2, random=3}
    CLOSE_REQ  CloseRequest{connectID=1}
    CLOSE_RSP  CloseResponse{error=1, connectID=2}
    DATA       Data{connectID=1, error=2, data=3}
    DIAL_CLS   CloseDial{random=1}
    DRAIN      Drain{}

Packet{type=1, oneof payload: dialRequest=2, dialResponse=3, data=4, closeRequest=5,
closeResponse=6, closeDial=7, drain=8}. Proto3 rules: zero values are not written, unknown fields
are skipped, int64 is a two's-complement varint.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class PacketError(ValueError):
    """Bytes that are not a Packet."""


class PacketType(enum.IntEnum):
    DIAL_REQ = 0
    DIAL_RSP = 1
    CLOSE_REQ = 2
    CLOSE_RSP = 3
    DATA = 4
    DIAL_CLS = 5
    DRAIN = 6


# The payload field of Packet each type travels in.
_PAYLOAD_FIELD = {
    PacketType.DIAL_REQ: 2,
    PacketType.DIAL_RSP: 3,
    PacketType.DATA: 4,
    PacketType.CLOSE_REQ: 5,
    PacketType.CLOSE_RSP: 6,
    PacketType.DIAL_CLS: 7,
    PacketType.DRAIN: 8,
}
_TYPE_OF_FIELD = {number: kind for kind, number in _PAYLOAD_FIELD.items()}
# Per payload message: field number -> attribute of Packet.
_LAYOUT: dict[PacketType, dict[int, str]] = {
    PacketType.DIAL_REQ: {1: "protocol", 2: "address", 3: "random"},
    PacketType.DIAL_RSP: {1: "error", 2: "connect_id", 3: "random"},
    PacketType.CLOSE_REQ: {1: "connect_id"},
    PacketType.CLOSE_RSP: {1: "error", 2: "connect_id"},
    PacketType.DATA: {1: "connect_id", 2: "error", 3: "data"},
    PacketType.DIAL_CLS: {1: "random"},
    PacketType.DRAIN: {},
}
_INTEGERS = frozenset({"connect_id", "random"})


@dataclass(frozen=True, slots=True)
class Packet:
    type: PacketType
    connect_id: int = 0
    random: int = 0
    protocol: str = ""
    address: str = ""
    error: str = ""
    data: bytes = b""

    def __repr__(self) -> str:  # payload bytes are the member's traffic: sizes only
        parts = [self.type.name]
        for name in ("connect_id", "random", "protocol", "address", "error"):
            value = getattr(self, name)
            if value:
                parts.append(f"{name}={value!r}")
        if self.data:
            parts.append(f"data=<{len(self.data)} bytes>")
        return f"Packet({', '.join(parts)})"


def dial_request(address: str, random: int, protocol: str = "tcp") -> Packet:
    return Packet(PacketType.DIAL_REQ, random=random, address=address, protocol=protocol)


def dial_response(random: int, *, connect_id: int = 0, error: str = "") -> Packet:
    return Packet(PacketType.DIAL_RSP, random=random, connect_id=connect_id, error=error)


def data(connect_id: int, payload: bytes) -> Packet:
    return Packet(PacketType.DATA, connect_id=connect_id, data=payload)


def close_request(connect_id: int) -> Packet:
    return Packet(PacketType.CLOSE_REQ, connect_id=connect_id)


def close_response(connect_id: int, error: str = "") -> Packet:
    return Packet(PacketType.CLOSE_RSP, connect_id=connect_id, error=error)


def dial_close(random: int) -> Packet:
    return Packet(PacketType.DIAL_CLS, random=random)


DRAIN = Packet(PacketType.DRAIN)


# --- encoding ------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64: ten bytes of two's complement, as protobuf
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _key(number, _LEN) + _varint(len(payload)) + payload


# Packet{type: DATA, data: ...}: the bytes before the payload's length.
_DATA_HEAD = bytes([1 << 3 | _VARINT, PacketType.DATA, _PAYLOAD_FIELD[PacketType.DATA] << 3 | _LEN])


def _encode_data(packet: Packet) -> bytes:
    """DATA, the packet of the hot path: its bytes joined once (no intermediate copies)."""
    connect_id = _key(1, _VARINT) + _varint(packet.connect_id) if packet.connect_id else b""
    error = _length_delimited(2, packet.error.encode()) if packet.error else b""
    data = _key(3, _LEN) + _varint(len(packet.data)) if packet.data else b""
    size = len(connect_id) + len(error) + len(data) + len(packet.data)
    return b"".join((_DATA_HEAD, _varint(size), connect_id, error, data, packet.data))


def encode(packet: Packet) -> bytes:
    if packet.type is PacketType.DATA:
        return _encode_data(packet)
    body = bytearray()
    for number, name in _LAYOUT[packet.type].items():
        value = getattr(packet, name)
        if not value:
            continue
        if name in _INTEGERS:
            body += _key(number, _VARINT) + _varint(value)
        elif isinstance(value, str):
            body += _length_delimited(number, value.encode())
        else:
            body += _length_delimited(number, value)
    head = _key(1, _VARINT) + _varint(packet.type) if packet.type else b""
    return head + _length_delimited(_PAYLOAD_FIELD[packet.type], bytes(body))


# --- decoding ------------------------------------------------------------------------------


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise PacketError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise PacketError("varint longer than ten bytes")


def _fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos)
        elif wire == _LEN:
            size, pos = _read_varint(buf, pos)
            if pos + size > len(buf):
                raise PacketError("truncated field")
            value, pos = buf[pos : pos + size], pos + size
        elif wire in (_I64, _I32):
            width = 8 if wire == _I64 else 4
            if pos + width > len(buf):
                raise PacketError("truncated fixed field")
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        else:
            raise PacketError(f"unsupported wire type {wire}")
        if number == 0:
            raise PacketError("field number 0")
        out.append((number, wire, value))
    return out


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def decode(buf: bytes) -> Packet:
    kind = PacketType.DIAL_REQ
    payload: bytes | None = None
    payload_kind: PacketType | None = None
    for number, wire, value in _fields(buf):
        if number == 1 and wire == _VARINT:
            assert isinstance(value, int)
            try:
                kind = PacketType(value)
            except ValueError:
                raise PacketError(f"unknown packet type {value}") from None
        elif number in _TYPE_OF_FIELD and wire == _LEN:
            assert isinstance(value, bytes)
            payload, payload_kind = value, _TYPE_OF_FIELD[number]
    if payload_kind is not None and payload_kind is not kind:
        raise PacketError(f"{kind.name} packet carries a {payload_kind.name} payload")
    values: dict[str, int | str | bytes] = {}
    layout = _LAYOUT[kind]
    for number, wire, value in _fields(payload or b""):
        name = layout.get(number)
        if name is None:
            continue  # a field a newer peer added
        if name in _INTEGERS:
            if wire != _VARINT or not isinstance(value, int):
                raise PacketError(f"{kind.name}.{name} is not a varint")
            values[name] = _int64(value)
        elif wire != _LEN or not isinstance(value, bytes):
            raise PacketError(f"{kind.name}.{name} is not length-delimited")
        elif name == "data":
            values[name] = value
        else:
            try:
                values[name] = value.decode()
            except UnicodeDecodeError:
                raise PacketError(f"{kind.name}.{name} is not UTF-8") from None
    return Packet(kind, **values)  # type: ignore[arg-type]
