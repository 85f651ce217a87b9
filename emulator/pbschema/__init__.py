"""What Kubernetes' protobuf messages mean: one table of field numbers for every built-in kind.

Each API group's module holds its messages in a small text form, written from the field
numbers in k8s.io/api and k8s.io/apimachinery generated.proto and the JSON tags of the Go
types (which say what encoding/json writes). One message is a name line ending in `:`
followed by one line per field:

    <number> <json name> [type] [flags]

type: string (the default), bool, int32, int64, double, bytes, time, microtime, quantity,
intorstr, raw (runtime.RawExtension / apiextensions JSON: embedded JSON), extra (an
ExtraValue), or a message name; `[T]` is a repeated T, `{T}` a map from string to T.
Special JSON forms: orbool, orarray, orstrings (the JSONSchemaProps unions).
flags: `*` a Go pointer (present in JSON exactly when present on the wire), `!` a JSON tag
without omitempty (zero values are written, a nil pointer/slice/map as null), `^` an
embedded struct whose fields are inlined into the parent's JSON. `A = B` makes message A
the same as B.

Field order is Go struct order, which is the order encoding/json writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import access, admission, apiextensions, apps, core, events, meta, network

_MODULES = (meta, core, apps, network, access, apiextensions, admission, events)
SCALARS = frozenset({"string", "bool", "int32", "int64", "double", "bytes"})
# Types whose Go value is a struct: encoding/json writes them even when zero (omitempty
# never drops a struct), unless the field is a nil pointer.
STRUCTS = frozenset({"time", "microtime", "quantity", "intorstr", "raw"})
SPECIAL = frozenset({"extra", "orbool", "orarray", "orstrings"})


@dataclass(frozen=True)
class Field:
    number: int
    name: str
    # A scalar, a STRUCTS or SPECIAL name, "msg:<Message>", or "map:<value type>".
    type: str
    repeated: bool = False
    pointer: bool = False
    keep_zero: bool = False
    inline: bool = False

    @property
    def is_map(self) -> bool:
        return self.type.startswith("map:")

    @property
    def is_struct(self) -> bool:
        """A non-pointer value encoding/json always writes (a Go struct)."""
        return not self.repeated and (self.type.startswith("msg:") or self.type in STRUCTS)


def _type(token: str) -> str:
    if token in SCALARS or token in STRUCTS or token in SPECIAL:
        return token
    return f"msg:{token}"


def _field(line: str, where: str) -> Field:
    parts = line.split()
    number, name, rest = int(parts[0]), parts[1], parts[2:]
    type_token, flags = "string", ""
    for token in rest:
        if set(token) <= set("*!^"):
            flags += token
        else:
            type_token = token
    repeated = False
    if type_token.startswith("[") and type_token.endswith("]"):
        repeated, type_ = True, _type(type_token[1:-1])
    elif type_token.startswith("{") and type_token.endswith("}"):
        type_ = "map:" + _type(type_token[1:-1])
    else:
        type_ = _type(type_token)
    if set(flags) - set("*!^"):
        raise ValueError(f"{where}: bad flags {flags!r}")
    return Field(number, name, type_, repeated, "*" in flags, "!" in flags, "^" in flags)


def parse(text: str) -> dict[str, tuple[Field, ...]]:
    """The messages of one schema text."""
    messages: dict[str, list[Field]] = {}
    aliases: dict[str, str] = {}
    current: list[Field] | None = None
    name = ""
    for raw_line in text.splitlines():
        line = raw_line.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line[0].isspace() and "=" in line:
            alias, _, target = (part.strip() for part in line.partition("="))
            aliases[alias] = target
            current = None
            continue
        if not line[0].isspace():
            if not line.endswith(":"):
                raise ValueError(f"schema line {raw_line!r}: a message name ends in ':'")
            name = line[:-1].strip()
            if name in messages:
                raise ValueError(f"message {name} defined twice")
            current = messages[name] = []
            continue
        if current is None:
            raise ValueError(f"schema line {raw_line!r} outside a message")
        current.append(_field(line.strip(), name))
    for alias, target in aliases.items():
        if alias in messages or target not in messages:
            raise ValueError(f"alias {alias} = {target}: bad name")
        messages[alias] = messages[target]
    return {k: tuple(v) for k, v in messages.items()}


def _merge() -> dict[str, tuple[Field, ...]]:
    merged: dict[str, tuple[Field, ...]] = {}
    for module in _MODULES:
        for name, fields in parse(module.SCHEMA).items():
            if name in merged:
                raise ValueError(f"message {name} defined in two schema modules")
            merged[name] = fields
    return merged


MESSAGES: dict[str, tuple[Field, ...]] = _merge()

# (apiVersion, kind) -> the kind's top-level message.
KINDS: dict[tuple[str, str], str] = {
    (api_version, kind): message
    for module in _MODULES
    for api_version, entries in module.KINDS.items()
    for kind, message in entries.items()
}

# Kinds every group version carries (metav1.AddToGroupVersion's option types).
ANY_VERSION_KINDS: dict[str, str] = dict(meta.ANY_VERSION_KINDS)

__all__ = ["ANY_VERSION_KINDS", "KINDS", "MESSAGES", "Field", "parse"]
