"""The OpenAPI v2 document in gnostic's protobuf form (`openapi_v2.Document`).

kube-apiserver serves `/openapi/v2` as protobuf to clients that ask for
`application/com.github.proto-openapi.spec.v2[@.]v1.0+protobuf`, and kubectl up to 1.28 asks
only for that (client-side apply builds its strategic merge patch from it). Field numbers are
those of gnostic's openapiv2/OpenAPIv2.proto (proto3: zero values are not written). Vendor
extensions and `default`/`enum`/`example` values travel as YAML text in `Any.yaml`; JSON
text is valid YAML, which is what we write.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from typing import Any

Doc = dict[str, Any]


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes(number: int, data: bytes) -> bytes:
    return _key(number, 2) + _varint(len(data)) + data


def _str(number: int, text: Any) -> bytes:
    if not text:
        return b""
    return _bytes(number, str(text).encode("utf-8"))


def _strs(number: int, items: Iterable[Any]) -> bytes:
    return b"".join(_bytes(number, str(item).encode("utf-8")) for item in items or ())


def _bool(number: int, value: Any) -> bytes:
    return _key(number, 0) + b"\x01" if value else b""


def _int(number: int, value: Any) -> bytes:
    return _key(number, 0) + _varint(int(value)) if value else b""


def _double(number: int, value: Any) -> bytes:
    return _key(number, 1) + struct.pack("<d", float(value)) if value else b""


def _msg(number: int, data: bytes, *, always: bool = False) -> bytes:
    return _bytes(number, data) if data or always else b""


def _any(value: Any) -> bytes:
    return _str(2, json.dumps(value))  # Any { yaml = 2 }


def _named_any(number: int, name: str, value: Any) -> bytes:
    return _msg(number, _str(1, name) + _msg(2, _any(value), always=True), always=True)


def _extensions(number: int, obj: Doc) -> bytes:
    return b"".join(_named_any(number, k, v) for k, v in obj.items() if k.startswith("x-"))


def schema(s: Doc) -> bytes:
    """openapi_v2.Schema."""
    out = [
        _str(1, s.get("$ref")),
        _str(2, s.get("format")),
        _str(3, s.get("title")),
        _str(4, s.get("description")),
    ]
    if "default" in s:
        out.append(_msg(5, _any(s["default"]), always=True))
    out += [
        _double(6, s.get("multipleOf")),
        _double(7, s.get("maximum")),
        _bool(8, s.get("exclusiveMaximum")),
        _double(9, s.get("minimum")),
        _bool(10, s.get("exclusiveMinimum")),
        _int(11, s.get("maxLength")),
        _int(12, s.get("minLength")),
        _str(13, s.get("pattern")),
        _int(14, s.get("maxItems")),
        _int(15, s.get("minItems")),
        _bool(16, s.get("uniqueItems")),
        _int(17, s.get("maxProperties")),
        _int(18, s.get("minProperties")),
        _strs(19, s.get("required") or ()),
    ]
    out += [_msg(20, _any(v), always=True) for v in s.get("enum") or ()]
    extra = s.get("additionalProperties")
    if isinstance(extra, dict):
        out.append(_msg(21, _msg(1, schema(extra), always=True), always=True))
    elif isinstance(extra, bool):  # AdditionalPropertiesItem { boolean = 2 } (a oneof: written)
        out.append(_msg(21, _key(2, 0) + (b"\x01" if extra else b"\x00"), always=True))
    kind = s.get("type")
    if kind:
        out.append(_msg(22, _strs(1, kind if isinstance(kind, list) else [kind]), always=True))
    items = s.get("items")
    if isinstance(items, dict):
        out.append(_msg(23, _msg(1, schema(items), always=True), always=True))
    out += [_msg(24, schema(sub), always=True) for sub in s.get("allOf") or ()]
    props = s.get("properties")
    if isinstance(props, dict):
        named = b"".join(
            _msg(1, _str(1, name) + _msg(2, schema(sub), always=True), always=True)
            for name, sub in props.items()
        )
        out.append(_msg(25, named, always=True))
    out += [_bool(27, s.get("readOnly"))]
    if "example" in s:
        out.append(_msg(30, _any(s["example"]), always=True))
    out.append(_extensions(31, s))
    return b"".join(out)


def _non_body(p: Doc) -> bytes:
    where = p.get("in")
    common = _bool(1, p.get("required")) + _str(2, where) + _str(3, p.get("description"))
    common += _str(4, p.get("name"))
    if where == "query":  # QueryParameterSubSchema
        sub = common + _bool(5, p.get("allowEmptyValue")) + _str(6, p.get("type"))
        sub += _str(7, p.get("format")) + _bool(20, p.get("uniqueItems"))
        return _msg(3, sub + _extensions(23, p), always=True)
    # Path and header sub-schemas share their numbering from `type` on.
    sub = common + _str(5, p.get("type")) + _str(6, p.get("format"))
    sub += _bool(19, p.get("uniqueItems")) + _extensions(22, p)
    return _msg(4 if where == "path" else 1, sub, always=True)


def _parameter(p: Doc) -> bytes:
    """openapi_v2.ParametersItem."""
    if "$ref" in p:
        return _msg(2, _str(1, p["$ref"]) + _str(2, p.get("description")), always=True)
    if p.get("in") == "body":
        body = _str(1, p.get("description")) + _str(2, p.get("name")) + _str(3, "body")
        body += _bool(4, p.get("required")) + _msg(5, schema(p.get("schema") or {}), always=True)
        body += _extensions(6, p)
        return _msg(1, _msg(1, body, always=True), always=True)
    return _msg(1, _msg(2, _non_body(p), always=True), always=True)


def _responses(responses: Doc) -> bytes:
    out = []
    for code, resp in responses.items():
        response = _str(1, resp.get("description"))
        if isinstance(resp.get("schema"), dict):
            response += _msg(2, _msg(1, schema(resp["schema"]), always=True), always=True)
        value = _msg(1, response, always=True)  # ResponseValue { response = 1 }
        out.append(_msg(1, _str(1, code) + _msg(2, value, always=True), always=True))
    return b"".join(out) + _extensions(2, responses)


def _operation(op: Doc) -> bytes:
    out = [
        _strs(1, op.get("tags") or ()),
        _str(2, op.get("summary")),
        _str(3, op.get("description")),
        _str(5, op.get("operationId")),
        _strs(6, op.get("produces") or ()),
        _strs(7, op.get("consumes") or ()),
    ]
    out += [_msg(8, _parameter(p), always=True) for p in op.get("parameters") or ()]
    if isinstance(op.get("responses"), dict):
        out.append(_msg(9, _responses(op["responses"]), always=True))
    out += [_strs(10, op.get("schemes") or ()), _bool(11, op.get("deprecated"))]
    out.append(_extensions(13, op))
    return b"".join(out)


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def _path_item(item: Doc) -> bytes:
    out = [_str(1, item.get("$ref"))]
    for method, number in _METHODS.items():
        if isinstance(item.get(method), dict):
            out.append(_msg(number, _operation(item[method]), always=True))
    out += [_msg(9, _parameter(p), always=True) for p in item.get("parameters") or ()]
    out.append(_extensions(10, item))
    return b"".join(out)


def encode_document(doc: Doc) -> bytes:
    """A Swagger 2.0 document (as JSON-like dicts) -> openapi_v2.Document bytes."""
    info = doc.get("info") or {}
    out = [
        _str(1, doc.get("swagger")),
        _msg(2, _str(1, info.get("title")) + _str(2, info.get("version")) + _extensions(7, info)),
        _str(3, doc.get("host")),
        _str(4, doc.get("basePath")),
        _strs(5, doc.get("schemes") or ()),
        _strs(6, doc.get("consumes") or ()),
        _strs(7, doc.get("produces") or ()),
    ]
    paths = b"".join(
        _msg(2, _str(1, path) + _msg(2, _path_item(item), always=True), always=True)
        for path, item in (doc.get("paths") or {}).items()
    )
    out.append(_msg(8, paths, always=True))
    definitions = b"".join(
        _msg(1, _str(1, name) + _msg(2, schema(s), always=True), always=True)
        for name, s in (doc.get("definitions") or {}).items()
    )
    out.append(_msg(9, definitions, always=True))
    out.append(_extensions(16, doc))
    return b"".join(out)
