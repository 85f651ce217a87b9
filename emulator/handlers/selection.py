"""Which objects a list, watch or deletecollection is about: its label and field selectors,
and the list options kube-apiserver accepts together."""

from __future__ import annotations

from collections.abc import Callable

from .. import errors
from ..errors import field_cause
from ..registry import JSON, ResourceType
from ..selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from ..wire import ApiRequest


def selectors(rt: ResourceType, req: ApiRequest) -> tuple[LabelSelector, FieldSelector]:
    labels = parse_label_selector(req.param("labelSelector"))
    supported = {"metadata.name", "metadata.namespace", *rt.field_labels}
    fields = parse_field_selector(
        req.param("fieldSelector"), supported.__contains__, bool(rt.field_labels)
    )
    return labels, fields


def matcher(
    rt: ResourceType, labels: LabelSelector, fields: FieldSelector
) -> Callable[[JSON], bool] | None:
    if labels.empty() and fields.empty():
        return None
    wanted = {r.field for r in fields.requirements}

    def match(obj: JSON) -> bool:
        meta = obj.get("metadata") or {}
        if not labels.matches(meta.get("labels")):
            return False
        if fields.empty():
            return True
        values: dict[str, str] = {}
        for f in wanted:
            if f == "metadata.name":
                values[f] = meta.get("name", "")
            elif f == "metadata.namespace":
                values[f] = meta.get("namespace", "")
            else:
                values[f] = rt.field_labels[f](obj)
        return fields.matches(values)

    return match


def validate_list_options(req: ApiRequest, watch: bool) -> None:
    match = req.param("resourceVersionMatch") or ""
    rv = req.param("resourceVersion") or ""
    cont = req.param("continue") or ""
    sie = req.param("sendInitialEvents")
    causes = []

    def forbid(f: str, msg: str) -> None:
        causes.append(field_cause("FieldValueForbidden", f, f"Forbidden: {msg}"))

    if watch:
        if sie is not None and match != "NotOlderThan":
            forbid(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )
        if match:
            if sie is None:
                forbid(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided",
                )
            if match != "NotOlderThan":
                causes.append(
                    field_cause(
                        "FieldValueNotSupported", "resourceVersionMatch",
                        f'Unsupported value: "{match}": supported values: "NotOlderThan"',
                    )
                )  # fmt: skip
            if cont:
                forbid(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
        if sie is not None and sie.lower() == "true" and not req.flag("allowWatchBookmarks"):
            forbid(
                "allowWatchBookmarks",
                "allowWatchBookmarks must be set to true when sendInitialEvents is provided",
            )
    else:
        if match:
            if not rv:
                forbid(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            if cont:
                forbid(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            if match not in ("Exact", "NotOlderThan"):
                causes.append(
                    field_cause(
                        "FieldValueNotSupported", "resourceVersionMatch",
                        f'Unsupported value: "{match}": supported values: "Exact", '
                        '"NotOlderThan", ""',
                    )
                )  # fmt: skip
            if match == "Exact" and rv == "0":
                forbid(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
        if sie is not None:
            forbid("sendInitialEvents", "sendInitialEvents is forbidden for list")
    if causes:
        raise errors.invalid("meta.k8s.io", "ListOptions", "", causes)
