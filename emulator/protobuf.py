"""Request bodies in Kubernetes' protobuf encoding, decoded to the JSON form of the object.

client-go's typed clients (and kubectl's, which are client-go's) send built-in kinds as
`application/vnd.kubernetes.protobuf`: the magic prefix `k8s\\x00`, then a runtime.Unknown
message {typeMeta{apiVersion, kind}, raw, contentEncoding, contentType} whose `raw` is the
object's own message. kube-apiserver decodes that into the Go type; the emulator keeps plain
dicts, so it decodes into the dict that Go's encoding/json would make of that struct: fields
in struct order, zero values dropped where the JSON tag says omitempty, value structs always
present, a zero metav1.Time as null.

The wire decoder is generic; what each message means comes from one schema table
(emulator.pbschema). Kinds without a table are refused with 415 rather than guessed;
a field number the table does not list (a newer client's field) is skipped, as the generated
Go Unmarshal skips it.
"""

from __future__ import annotations

import base64
import datetime
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .pbschema import ANY_VERSION_KINDS, KINDS, MESSAGES, Field
from .timefmt import micro_time, rfc3339

JSON = dict[str, Any]
PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
# What kube-apiserver lists in its 415 for the object endpoints of built-in and custom types.
BUILTIN_MEDIA_TYPES = ("application/json", "application/yaml", PROTOBUF)
CUSTOM_MEDIA_TYPES = ("application/json", "application/yaml")

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class ProtobufError(ValueError):
    """The bytes are not a well-formed protobuf message."""


class UnsupportedError(ValueError):
    """Well-formed, but a kind or field this emulator has no table for."""


_FIELDS_BY_NUMBER = {name: {f.number: f for f in fields} for name, fields in MESSAGES.items()}


# Kinds of aggregated servers whose Go types have no protobuf form (Karmada's Cluster): their
# protobuf decoder refuses the body with the generic apiserver's decode error, a 400.
NOT_PROTOBUF: dict[tuple[str, str], str] = {
    ("cluster.karmada.io/v1alpha1", "Cluster"): "*v1alpha1.Cluster",
}


def message_kind(api_version: str, kind: str) -> str | None:
    """The top-level message of a kind, or None where the emulator has no table for it."""
    return KINDS.get((api_version, kind)) or ANY_VERSION_KINDS.get(kind)


# ------------------------------------------------------------------ wire format


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def iter_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value): an int for varint/fixed, bytes for length-delimited."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0")
        value: int | bytes
        if wire == _VARINT:
            value, pos = _varint(data, pos)
        elif wire == _LEN:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ProtobufError("truncated length-delimited field")
            value, pos = data[pos : pos + size], pos + size
        elif wire == _I64:
            if pos + 8 > len(data):
                raise ProtobufError("truncated fixed64")
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == _I32:
            if pos + 4 > len(data):
                raise ProtobufError("truncated fixed32")
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        yield number, wire, value


def _signed(value: int, bits: int) -> int:
    value &= (1 << 64) - 1  # negative int32 travel as 10-byte varints
    if value >= 1 << 63:
        value -= 1 << 64
    if bits == 32:
        value = (value + (1 << 31)) % (1 << 32) - (1 << 31)
    return value


def _want(wire: int, expected: int, where: str) -> None:
    if wire != expected:
        raise ProtobufError(f"{where}: wire type {wire}, expected {expected}")


def _utf8(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtobufError(f"{where}: invalid UTF-8") from exc


# ------------------------------------------------------------------ well-known types


def _time(raw: bytes, micro: bool) -> str | None:
    """metav1.Time / MicroTime: empty bytes are the zero time (JSON null)."""
    if not raw:
        return None
    seconds = nanos = 0
    for number, wire, value in iter_fields(raw):
        if number == 1 and wire == _VARINT:
            assert isinstance(value, int)
            seconds = _signed(value, 64)
        elif number == 2 and wire == _VARINT:
            assert isinstance(value, int)
            nanos = _signed(value, 32)
    moment = _EPOCH + datetime.timedelta(seconds=seconds, microseconds=nanos // 1000)
    # metav1.Time keeps whole seconds in JSON
    return micro_time(moment) if micro else rfc3339(moment)


def _only_field(raw: bytes, where: str) -> bytes:
    """Field 1 (bytes or string) of a one-field message: Quantity, RawExtension, JSON."""
    out = b""
    for number, wire, value in iter_fields(raw):
        if number == 1:
            _want(wire, _LEN, where)
            assert isinstance(value, bytes)
            out = value
    return out


def _raw_json(raw: bytes, where: str) -> Any:
    """runtime.RawExtension, apiextensions JSON, FieldsV1: embedded JSON (empty is null)."""
    data = _only_field(raw, where)
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise UnsupportedError(f"{where}: embedded bytes that are not JSON") from exc


def _int_or_string(raw: bytes) -> int | str:
    kind, int_val, str_val = 0, 0, ""
    for number, wire, value in iter_fields(raw):
        if number == 1 and wire == _VARINT:
            assert isinstance(value, int)
            kind = _signed(value, 64)
        elif number == 2 and wire == _VARINT:
            assert isinstance(value, int)
            int_val = _signed(value, 32)
        elif number == 3 and wire == _LEN:
            assert isinstance(value, bytes)
            str_val = _utf8(value, "IntOrString.strVal")
    return str_val if kind == 1 else int_val


def _schema_union(raw: bytes, type_: str, where: str) -> Any:
    """The JSONSchemaProps unions, as their MarshalJSON writes them."""
    schema: JSON | None = None
    allows = False
    items: list[Any] = []
    for number, wire, value in iter_fields(raw):
        schema_number = 2 if type_ == "orbool" else 1
        if number == schema_number:
            schema = _value("msg:JSONSchemaProps", wire, value, where)
        elif type_ == "orbool" and number == 1:
            allows = _value("bool", wire, value, where)
        elif number == 2 and type_ == "orarray":
            items.append(_value("msg:JSONSchemaProps", wire, value, where))
        elif number == 2 and type_ == "orstrings":
            items.append(_value("string", wire, value, where))
    if type_ == "orbool":
        return schema if schema is not None else allows
    return items if items else schema


def _double(value: int) -> int | float:
    number: float = struct.unpack("<d", value.to_bytes(8, "little"))[0]
    # encoding/json writes a float64 without a fraction as an integer.
    return int(number) if number.is_integer() else number


def _map_entry(raw: bytes, value_type: str, where: str) -> tuple[str, Any]:
    key = ""
    val: Any = _zero(value_type)
    for number, wire, value in iter_fields(raw):
        if number == 1:
            _want(wire, _LEN, where)
            assert isinstance(value, bytes)
            key = _utf8(value, where)
        elif number == 2:
            val = _value(value_type, wire, value, where)
    return key, val


def _zero(type_: str) -> Any:
    """What encoding/json writes for the Go zero value of a type."""
    if type_ in ("string", "bytes"):
        return ""
    if type_ == "bool":
        return False
    if type_ in ("int32", "int64", "double", "intorstr"):
        return 0
    if type_ == "quantity":
        return "0"
    if type_ == "extra":
        return []
    if type_.startswith("msg:"):
        return decode_message(type_[4:], b"")
    return None  # time, microtime, raw and the unions: null


def _value(type_: str, wire: int, value: int | bytes, where: str) -> Any:
    if type_ in ("int32", "int64", "bool"):
        _want(wire, _VARINT, where)
        assert isinstance(value, int)
        if type_ == "bool":
            return value != 0
        return _signed(value, 32 if type_ == "int32" else 64)
    if type_ == "double":
        _want(wire, _I64, where)
        assert isinstance(value, int)
        return _double(value)
    _want(wire, _LEN, where)
    assert isinstance(value, bytes)
    if type_ == "string":
        return _utf8(value, where)
    if type_ == "bytes":
        return base64.b64encode(value).decode("ascii")
    if type_ in ("time", "microtime"):
        return _time(value, micro=type_ == "microtime")
    if type_ == "quantity":
        return _utf8(_only_field(value, where), where)
    if type_ == "intorstr":
        return _int_or_string(value)
    if type_ == "raw":
        return _raw_json(value, where)
    if type_ == "extra":  # ExtraValue: repeated string items = 1
        return [
            _utf8(v, where) for n, _, v in iter_fields(value) if n == 1 and isinstance(v, bytes)
        ]
    if type_ in ("orbool", "orarray", "orstrings"):
        return _schema_union(value, type_, where)
    if type_.startswith("msg:"):
        return decode_message(type_[4:], value)
    raise UnsupportedError(f"{where}: field type {type_}")


def _is_zero(value: Any) -> bool:
    return value is None or value in ("", 0, False) or value == [] or value == {}


def _collect(message: str, data: bytes) -> dict[str, Any]:
    """The fields present on the wire, decoded, by JSON name."""
    by_number = _FIELDS_BY_NUMBER[message]
    seen: dict[str, Any] = {}
    for number, wire, value in iter_fields(data):
        spec = by_number.get(number)
        if spec is None:
            continue
        where = f"{message}.{spec.name}"
        if spec.is_map:
            _want(wire, _LEN, where)
            assert isinstance(value, bytes)
            key, val = _map_entry(value, spec.type[4:], where)
            seen.setdefault(spec.name, {})[key] = val
        elif spec.repeated:
            items = seen.setdefault(spec.name, [])
            if wire == _LEN and spec.type in ("int32", "int64", "bool"):
                assert isinstance(value, bytes)
                pos = 0
                while pos < len(value):  # packed scalars
                    item, pos = _varint(value, pos)
                    items.append(_value(spec.type, _VARINT, item, where))
            else:
                items.append(_value(spec.type, wire, value, where))
        else:
            seen[spec.name] = _value(spec.type, wire, value, where)
    return seen


def _absent(spec: Field) -> tuple[bool, Any]:
    """(written?, value) for a field that is not on the wire."""
    if spec.keep_zero:
        nil = spec.pointer or spec.repeated or spec.is_map or spec.type == "bytes"
        return True, None if nil else _zero(spec.type)
    if spec.is_struct and not spec.pointer:
        return True, _zero(spec.type)  # value structs are always written
    return False, None


def decode_message(message: str, data: bytes) -> JSON:
    """Decode one message by its table into Go's JSON form of the struct."""
    fields = MESSAGES.get(message)
    if fields is None:
        raise UnsupportedError(f"message {message}")
    seen = _collect(message, data)
    out: JSON = {}
    for spec in fields:
        if spec.inline:
            embedded = seen.get(spec.name)
            out.update(embedded if embedded is not None else _zero(spec.type))
        elif spec.name in seen:
            value = seen[spec.name]
            if spec.pointer or spec.keep_zero or spec.is_struct or not _is_zero(value):
                out[spec.name] = value
        else:
            written, value = _absent(spec)
            if written:
                out[spec.name] = value
    return out


# ------------------------------------------------------------------ the envelope


@dataclass(frozen=True)
class Envelope:
    api_version: str
    kind: str
    raw: bytes
    content_encoding: str
    content_type: str


def unwrap(body: bytes) -> Envelope:
    """Split `k8s\\x00` + runtime.Unknown into its parts."""
    if not body.startswith(MAGIC):
        raise ProtobufError(
            "provided data does not appear to be a protobuf message, expected prefix "
            + json.dumps(list(MAGIC)).replace(",", "")
        )
    api_version = kind = encoding = content_type = ""
    raw = b""
    for number, wire, value in iter_fields(body[len(MAGIC) :]):
        if wire != _LEN or not isinstance(value, bytes):
            raise ProtobufError(f"runtime.Unknown field {number}: wire type {wire}")
        if number == 1:  # typeMeta {apiVersion = 1, kind = 2}
            for sub, sub_wire, sub_value in iter_fields(value):
                if sub_wire == _LEN and isinstance(sub_value, bytes):
                    if sub == 1:
                        api_version = _utf8(sub_value, "TypeMeta.apiVersion")
                    elif sub == 2:
                        kind = _utf8(sub_value, "TypeMeta.kind")
        elif number == 2:
            raw = value
        elif number == 3:
            encoding = _utf8(value, "Unknown.contentEncoding")
        elif number == 4:
            content_type = _utf8(value, "Unknown.contentType")
    return Envelope(api_version, kind, raw, encoding, content_type)


def unsupported_media_type(accepted: tuple[str, ...], detail: str = "") -> ApiError:
    message = (
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted)
    )
    if detail:
        message += f" ({detail})"
    return ApiError(415, "UnsupportedMediaType", message)


def _refuse_types_without_protobuf(envelope: Envelope) -> None:
    go_type = NOT_PROTOBUF.get((envelope.api_version, envelope.kind))
    if go_type is None:
        return
    version = envelope.api_version.rsplit("/", 1)[-1]
    raise ApiError(
        400,
        "BadRequest",
        f"{envelope.kind} in version {json.dumps(version)} cannot be handled as a "
        f"{envelope.kind}: object {go_type} does not implement the protobuf marshalling "
        "interface and cannot be encoded to a protobuf message",
    )


def decode_object(body: bytes, expected_kind: str = "") -> JSON:
    """A protobuf request body -> the object's JSON dict (with apiVersion and kind).

    Raises ApiError: 400 for malformed bytes (as kube-apiserver's decoder does), 415 for a
    kind or field the emulator has no table for.
    """
    target = expected_kind or "the expected kind"
    try:
        envelope = unwrap(body)
        if envelope.content_encoding:
            raise UnsupportedError(f"content encoding {envelope.content_encoding!r}")
        _refuse_types_without_protobuf(envelope)
        message = message_kind(envelope.api_version, envelope.kind)
        if message is None:
            raise UnsupportedError(
                f"no protobuf table for {envelope.api_version}, Kind={envelope.kind}"
            )
        decoded = decode_message(message, envelope.raw)
    except UnsupportedError as exc:
        raise unsupported_media_type(
            ("application/json", "application/yaml"),
            f"the emulator does not decode protobuf for this request: {exc}",
        ) from exc
    except ProtobufError as exc:
        raise ApiError(
            400,
            "BadRequest",
            f"the object provided is unrecognized (must be of type {target}): {exc}",
        ) from exc
    return {"kind": envelope.kind, "apiVersion": envelope.api_version, **decoded}
