"""Server-side apply and managedFields, as kube-apiserver's field manager keeps them.

The model follows sigs.k8s.io/structured-merge-diff and
k8s.io/apimachinery/pkg/util/managedfields:

- An object is walked with a `FieldMeta` that says, per field path, whether a list is
  atomic, a set or a map keyed by some fields, and whether a map is atomic.
- Apply merges the configuration into the live object, records the configuration's
  field set as the applier's, removes what the applier owned before, no longer
  applies and nobody else owns, and refuses (409) to change a value another
  manager owns unless forced, in which case ownership moves.
- Every other write (create, update, patch) records an "Update" entry for its
  manager with the fields it changed, taking them away from the other managers.

Pure functions on dicts; they never modify their inputs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from emulator import errors
from emulator import fieldpath as fp
from emulator.errors import ApiError
from emulator.fieldmeta import FieldMeta
from emulator.fieldpath import Path
from emulator.patch import json_equal
from emulator.timefmt import parse_time

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
MAX_UPDATE_MANAGERS: Final = 10
ANCIENT_CHANGES: Final = "ancient-changes"
BEFORE_FIRST_APPLY: Final = "before-first-apply"

# Fields that never appear in a manager's set (the field manager strips them).
_STRIPPED: Final[frozenset[Path]] = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:metadata",),
        *(
            ("f:metadata", "f:" + name)
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    }
)

# Metadata the server owns; values in an apply configuration do not replace them.
_SYSTEM_METADATA: Final = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)

# Defaults of list-map key fields that the built-in schemas declare (ports' protocol).
_KEY_DEFAULTS: Final[dict[str, Any]] = {"protocol": "TCP"}


class _Missing:
    pass


MISSING: Final = _Missing()


class _TypedError(Exception):
    pass


# --- walking values with their schema -----------------------------------------------


class _Typed:
    def __init__(self, meta: FieldMeta, *, strict: bool = False) -> None:
        self.meta = meta
        self.strict = strict
        self._lists: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {}

    def list_kind(self, mpath: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        cached = self._lists.get(mpath)
        if cached is not None:
            return cached
        info = self.meta.field(mpath)
        kind: tuple[str, tuple[str, ...]]
        if info.list_type == "map":
            keys = info.list_map_keys or ((info.patch_merge_key,) if info.patch_merge_key else ())
            kind = ("map", keys) if keys else ("atomic", ())
        elif info.list_type in ("set", "atomic"):
            kind = (info.list_type, ())
        elif "merge" in info.patch_strategy.split(","):
            # Built-in schemas without x-kubernetes-list-type: kube derives the list
            # type from the strategic-merge-patch tags.
            kind = ("map", (info.patch_merge_key,)) if info.patch_merge_key else ("set", ())
        else:
            kind = ("atomic", ())
        self._lists[mpath] = kind
        return kind

    def map_atomic(self, mpath: tuple[str, ...]) -> bool:
        return bool(mpath) and self.meta.field(mpath).map_type == "atomic"

    def item_pe(self, item: Any, kind: str, keys: tuple[str, ...], index: int, where: Path) -> str:
        if kind == "set":
            return fp.value(item)
        if not isinstance(item, dict):
            raise _TypedError(f"{fp.to_string(where)}: element {index}: expected map")
        fields: dict[str, Any] = {}
        for name in keys:
            if name in item and item[name] is not None:
                fields[name] = item[name]
            elif name in _KEY_DEFAULTS:
                fields[name] = _KEY_DEFAULTS[name]
            else:
                raise _TypedError(
                    f"{fp.to_string(where)}: element {index}: associative list with keys has "
                    f'an element that omits key field "{name}" (and doesn\'t have default value)'
                )
        return fp.key(fields)

    def items(self, lst: list[Any], mpath: tuple[str, ...], where: Path) -> list[tuple[str, Any]]:
        """(path element, item) pairs; duplicates are an error in strict mode and are
        otherwise collapsed to their first occurrence."""
        kind, keys = self.list_kind(mpath)
        out: list[tuple[str, Any]] = []
        seen: set[str] = set()
        for i, item in enumerate(lst):
            try:
                pe = self.item_pe(item, kind, keys, i, where)
            except _TypedError:
                if self.strict:
                    raise
                pe = f"i:{i}"
            if pe in seen:
                if self.strict:
                    raise _TypedError(
                        f"{fp.to_string(where)}: duplicate entries for key {fp.element_string(pe)}"
                    )
                continue
            seen.add(pe)
            out.append((pe, item))
        return out

    def is_leaf(self, v: Any, mpath: tuple[str, ...]) -> bool:
        if isinstance(v, dict):
            return self.map_atomic(mpath)
        if isinstance(v, list):
            return self.list_kind(mpath)[0] == "atomic"
        return True

    # The set of fields a value sets (ToFieldSet).
    def field_set(self, value: dict[str, Any]) -> set[Path]:
        out: set[Path] = set()
        self._fields(value, (), (), out)
        return out

    def _fields(self, v: Any, mpath: tuple[str, ...], prefix: Path, out: set[Path]) -> None:
        if prefix and self.is_leaf(v, mpath):
            out.add(prefix)
            return
        if isinstance(v, dict):
            for k, child in v.items():
                p = (*prefix, fp.field(k))
                if child is None or (isinstance(child, dict) and not child):
                    out.add(p)
                self._fields(child, (*mpath, k), p, out)
        elif isinstance(v, list):
            for pe, item in self.items(v, mpath, prefix):
                p = (*prefix, pe)
                out.add(p)
                if isinstance(item, dict):
                    self._fields(item, mpath, p, out)

    # Which fields differ between two values (Compare).
    def compare(self, old: Any, new: Any) -> tuple[set[Path], set[Path], set[Path]]:
        added: set[Path] = set()
        modified: set[Path] = set()
        removed: set[Path] = set()
        self._compare(old, new, (), (), added, modified, removed)
        return added, modified, removed

    def _compare(
        self,
        old: Any,
        new: Any,
        mpath: tuple[str, ...],
        prefix: Path,
        added: set[Path],
        modified: set[Path],
        removed: set[Path],
    ) -> None:
        present = new if old is MISSING else old
        leaf = bool(prefix) and self.is_leaf(present, mpath)
        if old is not MISSING and new is not MISSING:
            same_shape = (isinstance(old, dict) and isinstance(new, dict)) or (
                isinstance(old, list) and isinstance(new, list)
            )
            if not same_shape or (prefix and self.is_leaf(new, mpath)):
                leaf = True
        if leaf:
            if old is MISSING:
                added.add(prefix)
            elif new is MISSING:
                removed.add(prefix)
            elif not json_equal(old, new):
                modified.add(prefix)
            return
        if isinstance(present, dict):
            om = old if isinstance(old, dict) else {}
            nm = new if isinstance(new, dict) else {}
            for k in [*om, *(k for k in nm if k not in om)]:
                self._compare(
                    om.get(k, MISSING),
                    nm.get(k, MISSING),
                    (*mpath, k),
                    (*prefix, fp.field(k)),
                    added,
                    modified,
                    removed,
                )
        else:
            oi = dict(self.items(old, mpath, prefix)) if isinstance(old, list) else {}
            ni = dict(self.items(new, mpath, prefix)) if isinstance(new, list) else {}
            for pe in [*oi, *(pe for pe in ni if pe not in oi)]:
                o = oi.get(pe, MISSING)
                n = ni.get(pe, MISSING)
                p = (*prefix, pe)
                if isinstance(o, dict) or isinstance(n, dict):
                    self._compare(o, n, mpath, p, added, modified, removed)
                elif o is MISSING:
                    added.add(p)
                elif n is MISSING:
                    removed.add(p)
                elif not json_equal(o, n):
                    modified.add(p)
        if prefix:
            if old is MISSING:
                added.add(prefix)
            elif new is MISSING:
                removed.add(prefix)

    # The live object with the configuration merged in (Merge).
    def merge(self, live: Any, config: Any, mpath: tuple[str, ...] = (), where: Path = ()) -> Any:
        if config is MISSING:
            return live
        if live is MISSING:
            return copy.deepcopy(config)
        if isinstance(live, dict) and isinstance(config, dict) and not self.map_atomic(mpath):
            out = dict(live)
            for k, v in config.items():
                out[k] = self.merge(live.get(k, MISSING), v, (*mpath, k), (*where, fp.field(k)))
            return out
        if (
            isinstance(live, list)
            and isinstance(config, list)
            and self.list_kind(mpath)[0] != "atomic"
        ):
            return self._merge_list(live, config, mpath, where)
        return copy.deepcopy(config)

    def _merge_list(
        self, live: list[Any], config: list[Any], mpath: tuple[str, ...], where: Path
    ) -> list[Any]:
        # Items keep the configuration's order; live-only items stay where they were
        # relative to the shared ones (structured-merge-diff's list merge).
        lpairs = self.items(live, mpath, where)
        rpairs = self.items(config, mpath, where)
        lmap = dict(lpairs)
        rmap = dict(rpairs)
        shared = [pe for pe, _ in rpairs if pe in lmap]
        shared_at = 0

        def next_shared() -> str | None:
            return shared[shared_at] if shared_at < len(shared) else None

        out: list[Any] = []
        merged: set[str] = set()
        li = ri = 0

        def merge_item(pe: str) -> Any:
            return self.merge(lmap.get(pe, MISSING), rmap[pe], mpath, (*where, pe))

        while li < len(lpairs) or ri < len(rpairs):
            if li < len(lpairs) and ri < len(rpairs):
                lpe = lpairs[li][0]
                if lpe == rpairs[ri][0]:
                    merged.add(lpe)
                    out.append(merge_item(lpe))
                    li += 1
                    ri += 1
                    shared_at += 1 if next_shared() is not None else 0
                    continue
                if lpe in rmap and next_shared() is not None and next_shared() != lpe:
                    li += 1
                    continue
            if li < len(lpairs):
                lpe, litem = lpairs[li]
                if lpe not in rmap:
                    out.append(litem)
                    li += 1
                    continue
                if lpe in merged:
                    li += 1
                    continue
            if ri < len(rpairs):
                rpe = rpairs[ri][0]
                merged.add(rpe)
                out.append(merge_item(rpe))
                ri += 1
                if next_shared() == rpe:
                    shared_at += 1
        return out

    # The value without the nodes at the given paths (RemoveItems).
    def remove(self, value: Any, paths: set[Path]) -> Any:
        return self._remove(value, (), (), paths, fp.prefixes(paths))

    def _remove(
        self, v: Any, mpath: tuple[str, ...], prefix: Path, paths: set[Path], below: set[Path]
    ) -> Any:
        if isinstance(v, dict) and not (prefix and self.map_atomic(mpath)):
            out: dict[str, Any] = {}
            for k, child in v.items():
                p = (*prefix, fp.field(k))
                if p in paths:
                    continue
                out[k] = self._remove(child, (*mpath, k), p, paths, below) if p in below else child
            return out
        if isinstance(v, list) and self.list_kind(mpath)[0] != "atomic":
            kept: list[Any] = []
            for pe, item in self.items(v, mpath, prefix):
                p = (*prefix, pe)
                if p in paths:
                    continue
                kept.append(self._remove(item, mpath, p, paths, below) if p in below else item)
            return kept
        return v


# --- managedFields ------------------------------------------------------------------


@dataclass
class _Manager:
    manager: str
    operation: str
    api_version: str
    subresource: str = ""
    time: str | None = None
    fields: set[Path] = field(default_factory=set)

    @property
    def identity(self) -> str:
        return _identity(self.manager, self.operation, self.api_version, self.subresource)


def _identity(manager: str, operation: str, api_version: str, subresource: str) -> str:
    # Like the field manager's BuildManagerIdentifier: appliers are one entry whatever
    # version they apply, updaters one per version.
    ident: dict[str, str] = {"manager": manager, "operation": operation}
    if operation != "Apply" and api_version:
        ident["apiVersion"] = api_version
    if subresource:
        ident["subresource"] = subresource
    return json.dumps(ident, separators=(",", ":"), ensure_ascii=False)


_Managers = dict[str, _Manager]


def _decode(entries: Any) -> _Managers:
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise ValueError("managedFields must be a list")
    out: _Managers = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError("managedFields entries must be objects")
        if entry.get("fieldsType") != "FieldsV1":
            raise ValueError(f"invalid fieldsType {entry.get('fieldsType')!r}")
        m = _Manager(
            manager=str(entry.get("manager", "")),
            operation=str(entry.get("operation", "")),
            api_version=str(entry.get("apiVersion", "")),
            subresource=str(entry.get("subresource", "") or ""),
            time=entry.get("time"),
            fields=fp.from_fields_v1(entry.get("fieldsV1") or {}),
        )
        if m.identity in out:
            raise ValueError(f"duplicate manager entry {m.identity}")
        out[m.identity] = m
    return out


def _epoch(stamp: str | None) -> int:
    if not stamp:
        return 0
    try:
        return int(parse_time(stamp).timestamp())
    except ValueError:
        return 0


def _encode(managers: _Managers) -> list[dict[str, Any]]:
    ordered = sorted(
        managers.values(),
        key=lambda m: (m.operation, _epoch(m.time), m.manager, m.api_version, m.subresource),
    )
    out: list[dict[str, Any]] = []
    for m in ordered:
        entry: dict[str, Any] = {"manager": m.manager, "operation": m.operation}
        if m.api_version:
            entry["apiVersion"] = m.api_version
        if m.time:
            entry["time"] = m.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = fp.to_fields_v1(m.fields)
        if m.subresource:
            entry["subresource"] = m.subresource
        out.append(entry)
    return out


def _cap_update_managers(managers: _Managers) -> None:
    """Fold the oldest Update entries into one "ancient-changes" entry per version
    once there are more than ten of them."""
    updaters = [i for i, m in managers.items() if m.operation != "Apply"]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda i: (_epoch(managers[i].time), i))
    first_of_version: dict[str, str] = {}
    length = len(updaters)
    for ident in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        m = managers[ident]
        bucket = _identity(ANCIENT_CHANGES, "Update", m.api_version, "")
        first = first_of_version.get(m.api_version)
        if first is None:
            first_of_version[m.api_version] = ident
            continue
        if bucket not in managers:
            seed = managers.pop(first)
            managers[bucket] = _Manager(
                ANCIENT_CHANGES, "Update", m.api_version, "", seed.time, set(seed.fields)
            )
        target = managers[bucket]
        target.fields |= m.fields
        target.time = m.time
        del managers[ident]
        length -= 1


def _metadata(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return out


def _managed_fields_hidden(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without managedFields, sharing everything else with it: for reading only."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _store(obj: dict[str, Any], managers: _Managers) -> None:
    meta = obj.setdefault("metadata", {})
    encoded = _encode(managers)
    if encoded:
        meta["managedFields"] = encoded
    else:
        meta.pop("managedFields", None)


def _ignored_prefixes(ignore: Iterable[tuple[str, ...]]) -> list[Path]:
    return [tuple(fp.field(name) for name in path) for path in ignore]


class _ConflictsError(Exception):
    def __init__(self, conflicts: dict[str, set[Path]]) -> None:
        super().__init__("conflicts")
        self.conflicts = conflicts


def _update_ownership(
    typed: _Typed,
    old: Any,
    new: Any,
    managers: _Managers,
    workflow: str,
    *,
    force: bool,
    ignored: list[Path],
) -> tuple[set[Path], set[Path], set[Path]]:
    """Take changed fields away from every manager but `workflow` (structured-merge-
    diff's update step); returns the (added, modified, removed) comparison."""
    added, modified, removed = typed.compare(old, new)
    added = fp.without_prefixes(added, ignored)
    modified = fp.without_prefixes(modified, ignored)
    removed = fp.without_prefixes(removed, ignored)
    changed = added | modified
    conflicts: dict[str, set[Path]] = {}
    for ident, m in managers.items():
        if ident == workflow:
            continue
        contested = m.fields & changed
        if contested:
            conflicts[ident] = contested
    if conflicts and not force:
        raise _ConflictsError(conflicts)
    for ident, m in managers.items():
        if ident == workflow:
            continue
        m.fields -= conflicts.get(ident, set())
        m.fields -= removed
    for ident in [i for i, m in managers.items() if not m.fields and i != workflow]:
        del managers[ident]
    return added, modified, removed


def _print_manager(ident: str) -> str:
    data = json.loads(ident)
    text = json.dumps(data.get("manager", ""), ensure_ascii=False)
    if data.get("subresource"):
        text += f" with subresource {json.dumps(data['subresource'], ensure_ascii=False)}"
    if data.get("operation") == "Update":
        text += f" using {data.get('apiVersion', '')}"
    return text


def _conflict_error(conflicts: dict[str, set[Path]]) -> ApiError:
    pairs = [(ident, path) for ident in sorted(conflicts) for path in fp.iterate(conflicts[ident])]
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_print_manager(ident)}",
            "field": fp.to_string(path),
        }
        for ident, path in pairs
    ]
    if len(pairs) == 1:
        ident, path = pairs[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {_print_manager(ident)}: "
            f"{fp.to_string(path)}"
        )
    else:
        lines: list[str] = []
        for ident in sorted(conflicts):
            lines.append(f"conflicts with {_print_manager(ident)}:")
            lines.extend(f"- {fp.to_string(p)}" for p in fp.iterate(conflicts[ident]))
        message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


def _gvk(api_version: Any, kind: Any) -> str:
    av = api_version if isinstance(api_version, str) else ""
    group, _, version = av.rpartition("/")
    return f"{group}/{version}, Kind={kind if isinstance(kind, str) else ''}"


def _described(obj: dict[str, Any]) -> str:
    meta = _metadata(obj)
    return (
        f"{meta.get('namespace', '')}/{meta.get('name', '')}; "
        f"{_gvk(obj.get('apiVersion'), obj.get('kind'))}"
    )


def _go_json(data: Any) -> str:
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def _last_applied_value(applied: dict[str, Any]) -> str:
    config = copy.deepcopy(applied)
    meta = config.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        meta["annotations"].pop(LAST_APPLIED, None)
        if not meta["annotations"]:
            del meta["annotations"]
    return _go_json(config) + "\n"


def _drop_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls(x) for x in v]
    return v


# --- the two entry points -----------------------------------------------------------


def server_side_apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    *,
    manager: str,
    force: bool,
    meta: FieldMeta,
    api_version: str,
    subresource: str = "",
    now: str,
    ignore: Iterable[tuple[str, ...]] = (),
    kind: str | None = None,
) -> dict[str, Any]:
    """Apply `applied` (an apply configuration) for `manager` and return the new
    object with its managedFields; `live` is None when the object does not exist.

    `ignore` lists the field paths the endpoint resets (("status",) on the main
    resource of a type with a status subresource; ("spec",) ... on /status): they are
    neither owned nor contested. `kind` is the endpoint's kind, checked against the
    configuration's (defaults to the live object's). The caller checks the
    resourceVersion/uid preconditions a configuration may carry; the merged object
    keeps the live system metadata. Raises ApiError: 400 for a malformed
    configuration, 409 Conflict naming the other managers, 500 for an object that
    does not fit its schema's list keys.
    """
    if not isinstance(applied, dict):
        raise errors.bad_request("error decoding YAML: the apply configuration must be an object")
    expected_kind = kind if kind is not None else (live or {}).get("kind")
    if applied.get("apiVersion") != api_version or (
        expected_kind is not None and applied.get("kind") != expected_kind
    ):
        raise errors.bad_request(
            f"invalid object type: {_gvk(applied.get('apiVersion'), applied.get('kind'))}"
        )
    applied_meta = applied.get("metadata")
    if isinstance(applied_meta, dict) and applied_meta.get("managedFields") is not None:
        raise errors.bad_request("metadata.managedFields must be nil")

    ignored = _ignored_prefixes(ignore)
    typed = _Typed(meta)
    config = copy.deepcopy(applied)
    config_meta = config.get("metadata")
    if isinstance(config_meta, dict):
        for name in _SYSTEM_METADATA:
            config_meta.pop(name, None)
    try:
        config_set = _Typed(meta, strict=True).field_set(config)
    except _TypedError as bad:
        raise ApiError(
            500, "", f"failed to create typed patch object ({_described(applied)}): {bad}"
        ) from bad

    if live is None:
        managers: _Managers = {}
        body: dict[str, Any] = {}
    else:
        try:
            managers = _decode(_metadata(live).get("managedFields"))
        except ValueError as bad:
            raise ApiError(500, "", f"failed to decode managed fields: {bad}") from bad
        body = _without_managed_fields(live)
        if not managers:
            # Objects written before anybody applied: everything they hold is owned by
            # a pseudo-updater so that the first applier cannot silently drop it.
            track = _Manager(BEFORE_FIRST_APPLY, "Update", api_version, "", now)
            added, modified, _ = _update_ownership(
                typed, {}, body, managers, track.identity, force=True, ignored=ignored
            )
            track.fields = fp.without_prefixes(added | modified, ignored) - _STRIPPED
            if track.fields:
                managers[track.identity] = track

    applier = _Manager(manager, "Apply", api_version, subresource)
    ident = applier.identity

    def attempt(forced: bool) -> tuple[dict[str, Any] | None, _Managers]:
        trial = copy.deepcopy(managers)
        previous = trial.get(ident)
        merged = typed.merge(body, config)
        entry = _Manager(
            manager,
            "Apply",
            api_version,
            subresource,
            previous.time if previous else None,
            fp.without_prefixes(config_set, ignored),
        )
        trial[ident] = entry
        if previous and previous.fields:
            merged = _prune(typed, merged, trial, ident, previous.fields)
        _update_ownership(typed, body, merged, trial, ident, force=forced, ignored=ignored)
        if json_equal(body, merged):
            return None, trial
        return merged, trial

    try:
        merged, managers = attempt(force)
    except _ConflictsError as clash:
        allowed = _allowed_by_last_applied(typed, live) if manager == "kubectl" else None
        if allowed is None:
            raise _conflict_error(clash.conflicts) from None
        remaining = {
            i: {p for p in paths if p not in allowed} for i, paths in clash.conflicts.items()
        }
        remaining = {i: paths for i, paths in remaining.items() if paths}
        if remaining:
            raise _conflict_error(remaining) from None
        merged, managers = attempt(True)

    entry = managers[ident]
    if merged is None:
        result = copy.deepcopy(body)
    else:
        result = _drop_nulls(merged)
        entry.time = now
    entry.fields -= _STRIPPED
    if not entry.fields:
        del managers[ident]
    _cap_update_managers(managers)
    if manager == "kubectl" and live is not None and LAST_APPLIED in _annotations(live):
        result.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED] = (
            _last_applied_value(applied)
        )
    _store(result, managers)
    return result


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    ann = _metadata(obj).get("annotations")
    return ann if isinstance(ann, dict) else {}


def _allowed_by_last_applied(typed: _Typed, live: dict[str, Any] | None) -> set[Path] | None:
    """Fields kubectl's client-side apply recorded in its annotation: `kubectl apply
    --server-side` may take them over without a conflict (the upgrade path)."""
    if live is None:
        return None
    raw = _annotations(live).get(LAST_APPLIED)
    if not isinstance(raw, str) or not raw:
        return None
    try:
        last = json.loads(raw)
        if not isinstance(last, dict):
            return None
        return typed.field_set(last)
    except (ValueError, _TypedError):
        return None


def _prune(typed: _Typed, merged: Any, managers: _Managers, applier: str, last: set[Path]) -> Any:
    """Remove what the applier applied last time, no longer applies, and nobody else
    (updaters included) owns."""
    owned: set[Path] = set()
    for m in managers.values():
        owned |= m.fields
    owned = fp.with_named_fields(owned)
    candidates = fp.with_named_fields(last) - owned
    if not candidates:
        return merged
    present = fp.with_named_fields(typed.field_set(merged)) if isinstance(merged, dict) else set()
    doomed = {p for p in candidates if p in present}
    # Removing a node removes its subtree: keep only the outermost ones.
    doomed = {p for p in doomed if not any(p[:i] in doomed for i in range(1, len(p)))}
    return typed.remove(merged, doomed)


def track_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    meta: FieldMeta,
    api_version: str,
    subresource: str = "",
    now: str,
    ignore: Iterable[tuple[str, ...]] = (),
) -> None:
    """Record a create (`old` None), update or patch by `manager` in
    `new["metadata"]["managedFields"]` (in place).

    The managedFields `new` carries are honoured like kube does: `[]` (or `[{}]`)
    resets them, other valid entries replace the stored ones (main resource only),
    anything else falls back to `old`'s. An existing object without managedFields
    stays untracked until its first apply.
    """
    ignored = _ignored_prefixes(ignore)
    typed = _Typed(meta)
    new_meta = _metadata(new)
    old_managed = _metadata(old).get("managedFields") if old is not None else None
    try:
        managers = _decode(old_managed)
    except ValueError:
        return  # kube leaves the object as it is when it cannot read the live entries
    if not subresource and "managedFields" in new_meta:
        given = new_meta.get("managedFields")
        if isinstance(given, list) and (given == [] or given == [{}]):
            managers = {}
        else:
            try:
                decoded = _decode(given)
            except ValueError:
                decoded = {}
            if decoded:
                managers = decoded
    if not managers and old is not None:
        new_meta.pop("managedFields", None)
        return
    # Views for the comparison, which only reads them: no copy of the whole object.
    new_body = _managed_fields_hidden(new)
    old_body = _managed_fields_hidden(old) if old is not None else {}
    current = "\x00current-operation"
    try:
        added, modified, removed = _update_ownership(
            typed, old_body, new_body, managers, current, force=True, ignored=ignored
        )
    except _TypedError:
        new_meta.pop("managedFields", None)
        return
    taken = fp.without_prefixes(added | modified, ignored) - removed - _STRIPPED
    if taken:
        ident = _identity(manager, "Update", api_version, subresource)
        previous = managers.get(ident)
        fields = taken | (previous.fields if previous else set())
        managers[ident] = _Manager(manager, "Update", api_version, subresource, now, fields)
    _cap_update_managers(managers)
    if "metadata" not in new:
        new["metadata"] = {}
    _store(new, managers)
