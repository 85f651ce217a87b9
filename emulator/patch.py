"""The three classic patch types of kube-apiserver, on plain dicts.

- JSON patch (RFC 6902) as gopkg.in/evanphx/json-patch.v4 applies it;
- JSON merge patch (RFC 7386) as the same library's MergePatch does;
- strategic merge patch as k8s.io/apimachinery/pkg/util/strategicpatch does it,
  with the list strategies and merge keys answered by a `FieldMeta`.

Failures raise the `ApiError` the API server answers with. The inputs are never
modified: each function works on a deep copy.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from emulator import errors
from emulator.errors import ApiError
from emulator.fieldmeta import FieldMeta

# --- shared helpers -----------------------------------------------------------------


def go_format(v: Any) -> str:
    """Go's `%v` of a decoded JSON value, as the apiserver prints it in messages."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_format(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, list):
        return "[" + " ".join(go_format(x) for x in v) + "]"
    if isinstance(v, float):
        return format(v, "g") if not v.is_integer() or abs(v) >= 1e21 else str(int(v))
    return str(v)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of decoded JSON values: numbers by value, but a bool is no number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _go_json_type(v: Any) -> str:
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    return "null"


def _patch_not_applied() -> ApiError:
    # kube-apiserver wraps every JSON-patch application failure (and a few strategic
    # merge ones) with NewGenericServerResponse(422, ...), which drops the cause.
    return ApiError(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        {},
    )


def _unknown_error(message: str) -> ApiError:
    # A plain Go error reaching the handler: 500 with reason StatusReasonUnknown ("").
    return ApiError(500, "", message)


# --- JSON patch (RFC 6902) ----------------------------------------------------------


class _OpFailedError(Exception):
    pass


_INDEX = re.compile(r"^[+-]?[0-9]+$")


def _decode_key(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def _split(path: Any) -> tuple[list[str], str] | None:
    if not isinstance(path, str):
        raise _OpFailedError("path is not a string")
    parts = path.split("/")
    if len(parts) < 2:
        return None
    return [_decode_key(p) for p in parts[1:-1]], _decode_key(parts[-1])


def _find(doc: dict[str, Any], path: Any) -> tuple[dict[str, Any] | list[Any], str] | None:
    split = _split(path)
    if split is None:
        return None
    parts, last = split
    node: Any = doc
    for part in parts:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list):
            if not _INDEX.match(part):
                return None
            i = int(part)
            if i < 0 or i >= len(node):
                return None
            node = node[i]
        else:
            return None
        if not isinstance(node, dict | list):
            return None
    return node, last


def _index(container: list[Any], key: str, *, size: int) -> int:
    if not _INDEX.match(key):
        raise _OpFailedError(f"value was not a proper array index: '{key}'")
    i = int(key)
    if i >= size or i < -size:
        raise _OpFailedError(f"Unable to access invalid index: {i}")
    return i + size if i < 0 else i


def _get(container: dict[str, Any] | list[Any], key: str) -> tuple[bool, Any]:
    if isinstance(container, dict):
        return (key in container, container.get(key))
    i = _index(container, key, size=len(container))
    return True, container[i]


def _add(container: dict[str, Any] | list[Any], key: str, val: Any) -> None:
    if isinstance(container, dict):
        container[key] = val
        return
    if key == "-":
        container.append(val)
        return
    container.insert(_index(container, key, size=len(container) + 1), val)


def _remove(container: dict[str, Any] | list[Any], key: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise _OpFailedError(f"Unable to remove nonexistent key: {key}: missing value")
        del container[key]
        return
    del container[_index(container, key, size=len(container))]


def _located(doc: dict[str, Any], path: Any, what: str) -> tuple[dict[str, Any] | list[Any], str]:
    found = _find(doc, path)
    if found is None:
        raise _OpFailedError(f"{what} operation does not apply: doc is missing path: {path}")
    return found


def _apply_op(doc: dict[str, Any], op: dict[str, Any]) -> None:
    kind = op.get("op")
    if kind not in ("add", "remove", "replace", "move", "copy", "test"):
        raise _OpFailedError(f"Unexpected kind: {kind}")
    if "path" not in op:
        raise _OpFailedError("operation missing path field")
    path = op["path"]
    val = copy.deepcopy(op.get("value"))
    if kind == "add":
        container, key = _located(doc, path, "add")
        _add(container, key, val)
    elif kind == "remove":
        container, key = _located(doc, path, "remove")
        _remove(container, key)
    elif kind == "replace":
        container, key = _located(doc, path, "replace")
        present, _ = _get(container, key)
        if not present:
            raise _OpFailedError(f"replace operation does not apply: doc is missing key: {path}")
        if isinstance(container, dict):
            container[key] = val
        else:
            container[_index(container, key, size=len(container))] = val
    elif kind in ("move", "copy"):
        if "from" not in op:
            raise _OpFailedError("operation missing from field")
        source, skey = _located(doc, op["from"], kind + " from")
        present, moved = _get(source, skey)
        if not present:
            raise _OpFailedError(f"{kind} operation does not apply: doc is missing from path")
        if kind == "move":
            _remove(source, skey)
        else:
            moved = copy.deepcopy(moved)
        container, key = _located(doc, path, kind)
        _add(container, key, moved)
    else:
        container, key = _located(doc, path, "test")
        try:
            present, current = _get(container, key)
        except _OpFailedError:
            present, current = False, None
        if not present or current is None:
            if val is None:
                return
            raise _OpFailedError(f"testing value {path} failed: test failed")
        if not json_equal(current, val):
            raise _OpFailedError(f"testing value {path} failed: test failed")


def apply_json_patch(obj: dict[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 patch (already decoded from JSON) to `obj`."""
    if not isinstance(ops, list):
        raise errors.bad_request(
            f"json: cannot unmarshal {_go_json_type(ops)} into Go value of type jsonpatch.Patch"
        )
    for op in ops:
        if not isinstance(op, dict):
            raise errors.bad_request(
                f"json: cannot unmarshal {_go_json_type(op)} into Go value of type "
                "jsonpatch.Operation"
            )
    doc = copy.deepcopy(obj)
    try:
        for op in ops:
            _apply_op(doc, op)
    except _OpFailedError as failure:
        raise _patch_not_applied() from failure
    return doc


# --- JSON merge patch (RFC 7386) ----------------------------------------------------


def _prune_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _prune_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_prune_nulls(x) if x is not None else None for x in v]
    return v


def _merge_docs(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            doc.pop(k, None)
            continue
        cur = doc.get(k)
        if cur is None:
            doc[k] = _prune_nulls(v)
        elif isinstance(cur, dict) and isinstance(v, dict):
            _merge_docs(cur, v)
        elif isinstance(v, dict):
            doc[k] = _prune_nulls(v)
        else:
            doc[k] = v


def apply_merge_patch(obj: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply an RFC 7386 merge patch: nulls delete, objects merge, the rest replaces."""
    if isinstance(patch, list):
        # MergePatch turns the document into the array, which then cannot be decoded
        # into an object; the handler reports that as an invalid "patch" field.
        body = json.dumps(_prune_nulls(patch), separators=(",", ":"))
        raise errors.invalid(
            "",
            "",
            "",
            [
                errors.field_cause(
                    "FieldValueInvalid",
                    "patch",
                    f"Invalid value: {json.dumps(body)}: couldn't get version/kind; json parse "
                    "error: json: cannot unmarshal array into Go value of type struct "
                    '{ APIVersion string "json:\\"apiVersion,omitempty\\""; '
                    'Kind string "json:\\"kind,omitempty\\"" }',
                )
            ],
        )
    if not isinstance(patch, dict):
        raise errors.bad_request("Invalid JSON Patch")
    doc = copy.deepcopy(obj)
    _merge_docs(doc, copy.deepcopy(patch))
    return doc


# --- strategic merge patch ----------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList"
_SET_ORDER = "$setElementOrder"

_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
_BAD_SET_ORDER = "invalid patch format of setElementOrder list"
_NO_LIST_OF_LISTS = "lists of lists are not supported"


class _SmpError(Exception):
    def __init__(self, message: str, kind: str = "unknown") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind  # "bad_request" | "invalid" | "unknown"

    def api_error(self) -> ApiError:
        if self.kind == "bad_request":
            return errors.bad_request(self.message)
        if self.kind == "invalid":
            return _patch_not_applied()
        return _unknown_error(self.message)


def _no_merge_key(m: dict[str, Any], key: str) -> _SmpError:
    return _SmpError(f"map: {go_format(m)} does not contain declared merge key: {key}")


def _bad_patch_type(directive: Any, m: dict[str, Any]) -> _SmpError:
    return _SmpError(f"unknown patch type: {go_format(directive)} in map: {go_format(m)}")


def _go_type(v: Any) -> str:
    if isinstance(v, dict):
        return "map[string]interface {}"
    if isinstance(v, list):
        return "[]interface {}"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    return "<nil>"


def _same_go_type(a: Any, b: Any) -> bool:
    return _go_type(a) == _go_type(b)


def _scalar_eq(a: Any, b: Any) -> bool:
    # Go compares interface{} values: equal only with the same dynamic type.
    return _same_go_type(a, b) and not isinstance(a, dict | list) and bool(a == b)


def _key_eq(a: Any, b: Any) -> bool:
    return _same_go_type(a, b) and json_equal(a, b)


def _remove_directives(obj: Any) -> tuple[Any, bool]:
    """Strip directive markers from a value taken whole; a map that is itself a
    directive is dropped. Also drops the `$...` directive keys, which the typed
    conversion after the patch would discard as unknown fields."""
    if isinstance(obj, dict):
        if _DIRECTIVE in obj:
            return None, False
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if k == _RETAIN_KEYS or k.startswith((_DELETE_PRIMITIVE + "/", _SET_ORDER + "/")):
                continue
            nv, keep = _remove_directives(v)
            if keep:
                out[k] = nv
        return out, True
    if isinstance(obj, list):
        res = []
        for v in obj:
            nv, keep = _remove_directives(v)
            if keep:
                res.append(nv)
        return res, True
    return obj, True


def _discard_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _discard_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_discard_nulls(x) for x in v]
    return v


def _take_whole(patch_value: Any) -> tuple[Any, bool]:
    return _remove_directives(_discard_nulls(patch_value))


def _strategy(meta: FieldMeta, mpath: tuple[str, ...]) -> tuple[str, str | None]:
    """(patch strategy without retainKeys, merge key) of the field at `mpath`."""
    info = meta.field(mpath)
    parts = [p for p in info.patch_strategy.split(",") if p]
    if len(parts) > 2 or (len(parts) == 2 and "retainKeys" not in parts):
        raise _SmpError(f"unexpected patch strategy: {go_format(parts)}")
    rest = [p for p in parts if p != "retainKeys"]
    return (rest[0] if rest else ""), info.patch_merge_key


def _extract_key(key: str, prefix: str, error: str) -> str:
    head, sep, tail = key.partition("/")
    if not sep or head != prefix:
        raise _SmpError(error, "bad_request")
    return tail


def _element_kind(*lists: list[Any]) -> str:
    kind = ""
    for lst in lists:
        for v in lst:
            t = _go_type(v)
            if not kind:
                kind = t
                if isinstance(v, list):
                    raise _SmpError(_NO_LIST_OF_LISTS, "invalid")
            elif kind != t:
                raise _SmpError(f"list element types are not identical: {go_format(list(lists))}")
    if not kind:
        raise _SmpError("no elements in any of the given slices")
    return kind


def _merge_key_value(item: Any, merge_key: str) -> Any:
    if not isinstance(item, dict):
        raise _SmpError(f"expected a map[string]interface {{}}, but received a {_go_type(item)}")
    if merge_key not in item:
        raise _no_merge_key(item, merge_key)
    return item[merge_key]


def _find_by_key(items: list[Any], merge_key: str, val: Any) -> int:
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _SmpError(f"value for key {i} is not a map.")
        if merge_key in item and _key_eq(item[merge_key], val):
            return i
    return -1


def _index_in(order: list[Any], item: Any, merge_key: str, is_map: bool) -> int:
    probe = item.get(merge_key) if is_map and isinstance(item, dict) else item
    for i, v in enumerate(order):
        other = v.get(merge_key) if is_map and isinstance(v, dict) else v
        if _scalar_eq(probe, other) or (probe is None and other is None):
            return i
    return -1


def _sort_by(items: list[Any], order: list[Any], merge_key: str, is_map: bool) -> list[Any]:
    deletes: list[Any] = []
    if is_map:
        for lst in (items, order):
            for item in lst:
                _merge_key_value(item, merge_key)
        keep = [i for i in items if not (isinstance(i, dict) and i.get(_DIRECTIVE) == "delete")]
        deletes = [i for i in items if isinstance(i, dict) and i.get(_DIRECTIVE) == "delete"]
        items = keep
    ranked = sorted(
        enumerate(items),
        key=lambda pair: (_index_in(order, pair[1], merge_key, is_map), pair[0]),
    )
    return [item for _, item in ranked] + deletes


def _normalize_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    is_map: bool,
) -> list[Any]:
    """Patch items keep the patch's order, server-only items the live order, and the
    two are interleaved by their positions in the live list where both have one."""
    right = _sort_by(patch_items, patch_order, merge_key, is_map)
    left = _sort_by(server_only, server_order, merge_key, is_map)
    out: list[Any] = []
    i = j = 0
    while i < len(left) and j < len(right):
        li = _index_in(server_order, left[i], merge_key, is_map)
        ri = _index_in(server_order, right[j], merge_key, is_map)
        if li >= 0 and ri >= 0 and li < ri:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out + left[i:] + right[j:]


def _partition(
    merged: list[Any], by: list[Any], merge_key: str | None
) -> tuple[list[Any], list[Any]]:
    inside: list[Any] = []
    outside: list[Any] = []
    for v in merged:
        if merge_key:
            found = _find_by_key(by, merge_key, _merge_key_value(v, merge_key)) >= 0
        else:
            found = any(_scalar_eq(v, b) for b in by)
        (inside if found else outside).append(v)
    return inside, outside


def _dedup_scalars(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in items:
        if not any(_scalar_eq(v, o) for o in out):
            out.append(v)
    return out


def _merge_slice(
    original: list[Any],
    patch: list[Any],
    meta: FieldMeta,
    mpath: tuple[str, ...],
    merge_key: str | None,
    is_delete_list: bool,
) -> list[Any]:
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    is_map = kind.startswith("map")
    if not is_map:
        if is_delete_list:
            return [v for v in original if not any(_scalar_eq(v, d) for d in patch)]
        merged = _dedup_scalars(original + patch)
    else:
        if not merge_key:
            raise _SmpError(f"cannot merge lists without merge key for {'.'.join(mpath)}")
        original, patch = _merge_special_elements(original, patch, merge_key)
        merged = list(original)
        for item in patch:
            val = _merge_key_value(item, merge_key)
            at = _find_by_key(merged, merge_key, val)
            if at >= 0:
                merged[at] = _merge_map(merged[at], item, meta, mpath)
            else:
                taken, keep = _take_whole(item)
                if keep:
                    merged.append(taken)
    patch_items, server_only = _partition(merged, patch, merge_key if is_map else None)
    return _normalize_order(patch_items, server_only, patch, original, merge_key or "", is_map)


def _merge_special_elements(
    original: list[Any], patch: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    plain: list[Any] = []
    replace = False
    for item in patch:
        if not isinstance(item, dict) or _DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == "delete":
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            target = item[merge_key]
            original = [
                o
                for o in original
                if not (isinstance(o, dict) and merge_key in o and _key_eq(o[merge_key], target))
            ]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _SmpError("merging lists cannot yet be specified in the patch")
        else:
            raise _bad_patch_type(directive, item)
    if replace:
        return [_take_whole(p)[0] for p in plain], []
    return original, plain


def _merge_list_field(
    original: Any,
    patch: Any,
    meta: FieldMeta,
    mpath: tuple[str, ...],
    is_delete_list: bool,
) -> list[Any]:
    strategy, merge_key = _strategy(meta, mpath)
    if strategy == "merge" or is_delete_list:
        return _merge_slice(original, patch, meta, mpath, merge_key, is_delete_list)
    taken, _ = _take_whole(patch)
    return list(taken)


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list):
        raise _SmpError(_BAD_RETAIN_KEYS, "bad_request")
    for k, v in patch.items():
        if v is None or k.startswith((_DELETE_PRIMITIVE, _SET_ORDER)):
            continue
        if not any(_scalar_eq(k, r) for r in retain):
            raise _SmpError(_BAD_RETAIN_KEYS, "bad_request")
    for k in list(original):
        if not any(_scalar_eq(k, r) for r in retain):
            del original[k]


def _apply_set_element_order(
    original: dict[str, Any], patch: dict[str, Any], meta: FieldMeta, mpath: tuple[str, ...]
) -> None:
    for key in [k for k in patch if k.startswith(_SET_ORDER)]:
        order = patch.pop(key)
        if not isinstance(order, list):
            raise _SmpError(f"expected a []interface {{}}, but received a {_go_type(order)}")
        field = _extract_key(key, _SET_ORDER, _BAD_SET_ORDER)
        fpath = (*mpath, field)
        strategy, merge_key = _strategy(meta, fpath)
        found_original = field in original
        found_patch = field in patch
        original_list = original.get(field)
        patch_list = patch.get(field)
        if found_original and not isinstance(original_list, list):
            raise _SmpError(
                f"expected a []interface {{}}, but received a {_go_type(original_list)}"
            )
        if found_patch and not isinstance(patch_list, list):
            raise _SmpError(f"expected a []interface {{}}, but received a {_go_type(patch_list)}")
        _validate_set_order(
            patch_list if isinstance(patch_list, list) else [], order, merge_key or ""
        )
        if found_original and not found_patch:
            merged = list(original_list or [])
        elif found_patch and not found_original:
            merged = list(_take_whole(patch_list)[0])
        elif found_original and found_patch:
            if strategy == "merge":
                merged = _merge_slice(
                    original_list or [], patch_list or [], meta, fpath, merge_key, False
                )
            else:
                merged = list(_take_whole(patch_list)[0])
        else:
            continue
        patch_items, server_only = _partition(merged, order, merge_key)
        is_map = _element_kind(original_list or [], patch_list or []).startswith("map")
        original[field] = _normalize_order(
            patch_items, server_only, order, list(original_list or []), merge_key or "", is_map
        )
        patch.pop(field, None)


def _validate_set_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    if not order or not patch_list:
        return
    items = patch_list
    if merge_key:
        items = [
            p for p in patch_list if not (isinstance(p, dict) and p.get(_DIRECTIVE) == "delete")
        ]
    pi = oi = 0
    while pi < len(items) and oi < len(order):
        item = items[pi]
        if isinstance(item, dict) and _DIRECTIVE in item:
            pi += 1
            continue
        if merge_key:
            same = _key_eq(
                _merge_key_value(item, merge_key), _merge_key_value(order[oi], merge_key)
            )
        else:
            same = _scalar_eq(item, order[oi])
        if same:
            pi += 1
        oi += 1
    if pi < len(items) and oi >= len(order):
        raise _SmpError(
            f"the order in patch list:\n{go_format(patch_list)}\n doesn't match "
            f"{_SET_ORDER} list:\n{go_format(order)}"
        )


def _merge_map(
    original: dict[str, Any] | None,
    patch: dict[str, Any],
    meta: FieldMeta,
    mpath: tuple[str, ...],
) -> dict[str, Any]:
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace":
            rest = {k: v for k, v in patch.items() if k != _DIRECTIVE}
            return dict(_take_whole(rest)[0])
        if directive == "delete":
            return {}
        raise _bad_patch_type(directive, patch)
    original = {} if original is None else original
    patch = dict(patch)
    _apply_retain_keys(original, patch)
    _apply_set_element_order(original, patch, meta, mpath)
    # Deletion lists first so that the result does not depend on key order.
    keys = sorted(patch, key=lambda k: not k.startswith(_DELETE_PRIMITIVE))
    for key in keys:
        pv = patch[key]
        is_delete_list = False
        k = key
        if key.startswith(_DELETE_PRIMITIVE):
            k = _extract_key(key, _DELETE_PRIMITIVE, _BAD_PRIMITIVE_LIST)
            is_delete_list = True
        if pv is None:
            original.pop(k, None)
            continue
        if k not in original:
            if not is_delete_list:
                taken, keep = _take_whole(pv)
                if keep:
                    original[k] = taken
            continue
        ov = original[k]
        if not _same_go_type(ov, pv):
            if not is_delete_list:
                taken, keep = _take_whole(pv)
                if keep:
                    original[k] = taken
                else:
                    del original[k]
            continue
        fpath = (*mpath, k)
        if isinstance(ov, dict):
            strategy, _ = _strategy(meta, fpath)
            if strategy == "replace":
                taken, keep = _take_whole(pv)
                if keep:
                    original[k] = taken
                else:
                    del original[k]
            else:
                original[k] = _merge_map(ov, pv, meta, fpath)
        elif isinstance(ov, list):
            original[k] = _merge_list_field(ov, pv, meta, fpath, is_delete_list)
        else:
            original[k] = pv
    return original


def apply_strategic_merge_patch(obj: dict[str, Any], patch: Any, meta: FieldMeta) -> dict[str, Any]:
    """Apply a strategic merge patch to `obj`; list strategies come from `meta`."""
    if patch is None:
        return copy.deepcopy(obj)
    if not isinstance(patch, dict):
        raise errors.bad_request(
            f"json: cannot unmarshal {_go_json_type(patch)} into Go value of type "
            "map[string]interface {}"
        )
    try:
        return _merge_map(copy.deepcopy(obj), copy.deepcopy(patch), meta, ())
    except _SmpError as failure:
        raise failure.api_error() from failure
