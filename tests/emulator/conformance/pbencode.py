"""A protobuf client for tests: encodes a JSON object into Kubernetes' protobuf wire form the way
client-go's generated Marshal does, from the same generated.proto field numbers the emulator's
schema table holds.

As Go does, it writes every non-pointer scalar and value struct even when zero (a zero
metav1.Time as an empty message), pointers only when set, repeated and map fields item by
item (maps sorted by key). A JSON key the message has no field for is an error, so a sample
object cannot silently carry a field the table lacks.
"""

from __future__ import annotations

import base64
import datetime
import json
import struct
from typing import Any

from emulator.pbschema import MESSAGES, Field

_VARINT, _I64, _LEN = 0, 1, 2


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = b""
    while True:
        if n < 0x80:
            return out + bytes([n])
        out += bytes([n & 0x7F | 0x80])
        n >>= 7


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def ld(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return tag(number, _LEN) + varint(len(data)) + data


def vi(number: int, value: int) -> bytes:
    return tag(number, _VARINT) + varint(value)


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    # runtime.Unknown: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2, contentEncoding = 3,
    # contentType = 4 (client-go writes the two empty strings too).
    type_meta = ld(1, api_version) + ld(2, kind)
    return b"k8s\x00" + ld(1, type_meta) + ld(2, raw) + ld(3, "") + ld(4, "")


def encode_object(obj: dict[str, Any], message: str) -> bytes:
    """A whole request body: the envelope around the object's message."""
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return envelope(obj["apiVersion"], obj["kind"], encode_message(message, body))


def _time(text: str | None, micro: bool) -> bytes:
    if text is None:
        return b""  # the zero metav1.Time marshals to nothing
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ"
    moment = datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.UTC)
    seconds = int(moment.timestamp())
    return vi(1, seconds) + vi(2, moment.microsecond * 1000)


def _int_or_string(value: int | str) -> bytes:
    if isinstance(value, str):
        return vi(1, 1) + vi(2, 0) + ld(3, value)
    return vi(1, 0) + vi(2, value) + ld(3, "")


def _schema_union(type_: str, value: Any) -> bytes:
    if type_ == "orbool":
        if isinstance(value, bool):
            return vi(1, int(value))
        return vi(1, 1) + ld(2, encode_message("JSONSchemaProps", value))
    if isinstance(value, dict):
        return ld(1, encode_message("JSONSchemaProps", value))
    if type_ == "orarray":
        return b"".join(ld(2, encode_message("JSONSchemaProps", item)) for item in value)
    return b"".join(ld(2, item) for item in value)


def _encode(type_: str, number: int, value: Any) -> bytes:
    if type_ in ("int32", "int64"):
        return vi(number, value)
    if type_ == "bool":
        return vi(number, int(value))
    if type_ == "double":
        return tag(number, _I64) + struct.pack("<d", float(value))
    if type_ == "string":
        return ld(number, value)
    if type_ == "bytes":
        return ld(number, base64.b64decode(value))
    if type_ in ("time", "microtime"):
        return ld(number, _time(value, micro=type_ == "microtime"))
    if type_ == "quantity":
        return ld(number, ld(1, value))
    if type_ == "intorstr":
        return ld(number, _int_or_string(value))
    if type_ == "raw":
        return ld(number, b"" if value is None else ld(1, json.dumps(value)))
    if type_ == "extra":
        return ld(number, b"".join(ld(1, item) for item in value))
    if type_ in ("orbool", "orarray", "orstrings"):
        return ld(number, _schema_union(type_, value))
    if type_.startswith("msg:"):
        return ld(number, encode_message(type_[4:], value or {}))
    raise ValueError(f"no encoding for {type_}")


_ZEROS: dict[str, Any] = {
    "string": "", "bool": False, "int32": 0, "int64": 0, "double": 0.0, "quantity": "0",
    "intorstr": 0,
}  # fmt: skip


def _inlined_names(fields: tuple[Field, ...]) -> set[str]:
    names = set()
    for spec in fields:
        if spec.inline:
            names |= _inlined_names(MESSAGES[spec.type[4:]])
        else:
            names.add(spec.name)
    return names


def encode_message(message: str, obj: dict[str, Any]) -> bytes:
    fields = MESSAGES[message]
    unknown = set(obj) - _inlined_names(fields)
    if unknown:
        raise KeyError(f"{message} has no field for {sorted(unknown)}")
    out = b""
    for spec in sorted(fields, key=lambda f: f.number):
        if spec.inline:
            own = _inlined_names(MESSAGES[spec.type[4:]])
            embedded = {k: v for k, v in obj.items() if k in own}
            out += ld(spec.number, encode_message(spec.type[4:], embedded))
            continue
        value = obj.get(spec.name)
        if spec.is_map:
            for key in sorted(value or {}):
                entry = ld(1, key) + _encode(spec.type[4:], 2, value[key])
                out += ld(spec.number, entry)
        elif spec.repeated:
            for item in value or []:
                out += _encode(spec.type, spec.number, item)
        elif value is not None:
            out += _encode(spec.type, spec.number, value)
        elif not spec.pointer and spec.type != "bytes":  # a nil []byte is not written
            # Go writes every value field: a zero scalar, an empty struct, a zero time.
            out += _encode(spec.type, spec.number, _ZEROS.get(spec.type))
    return out
