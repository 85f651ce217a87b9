"""Generic ObjectMeta validation, with kube-apiserver's messages."""

from __future__ import annotations

import re
from typing import Any

from .errors import field_cause

JSON = dict[str, Any]
Cause = dict[str, Any]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QNAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LVALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
QNAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LVALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def name_problems(name: str, kind: str, prefix: bool = False) -> list[str]:
    """Problems of a name under a validation kind ("subdomain", "label", "label1035", "path")."""
    if kind == "none":
        return []
    if prefix:
        # generateName is checked with its trailing dash tolerated.
        name = name[:-1] if name.endswith("-") else name
        if not name:
            return []
    out: list[str] = []
    if kind == "path":
        if name in (".", ".."):
            out.append(f"may not be '{name}'")
        for ch in "/%":
            if ch in name:
                out.append(f"may not contain '{ch}'")
        return out
    if kind == "subdomain":
        if len(name) > 253:
            out.append("must be no more than 253 characters")
        if not _SUBDOMAIN.match(name):
            out.append(SUBDOMAIN_MSG)
    elif kind == "label":
        if len(name) > 63:
            out.append("must be no more than 63 characters")
        if not _LABEL.match(name):
            out.append(LABEL_MSG)
    elif kind == "label1035":
        if len(name) > 63:
            out.append("must be no more than 63 characters")
        if not _LABEL_1035.match(name):
            out.append(LABEL_1035_MSG)
    return out


def qualified_name_problems(key: str) -> list[str]:
    out: list[str] = []
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            out.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _SUBDOMAIN.match(prefix):
            out.append("prefix part " + SUBDOMAIN_MSG)
    if not name:
        out.append("name part must be non-empty")
    else:
        if len(name) > 63:
            out.append("name part must be no more than 63 characters")
        if not _QNAME.match(name):
            out.append(QNAME_MSG)
    return out


def validate_object_meta(
    meta: JSON, name_kind: str, namespaced: bool, old: JSON | None = None
) -> list[Cause]:
    causes: list[Cause] = []
    name = meta.get("name") or ""
    if not name and not meta.get("generateName"):
        causes.append(
            field_cause(
                "FieldValueRequired",
                "metadata.name",
                "Required value: name or generateName is required",
            )
        )
    elif name:
        for problem in name_problems(name, name_kind):
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    "metadata.name",
                    f"Invalid value: {_quote(name)}: {problem}",
                )
            )
    gen = meta.get("generateName")
    if gen and not name:
        for problem in name_problems(gen, name_kind, prefix=True):
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    "metadata.generateName",
                    f"Invalid value: {_quote(gen)}: {problem}",
                )
            )
    labels = meta.get("labels") or {}
    causes += label_causes("metadata.labels", labels if isinstance(labels, dict) else {})
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, dict):
        for key in annotations:
            for problem in qualified_name_problems(key):
                causes.append(
                    field_cause(
                        "FieldValueInvalid",
                        "metadata.annotations",
                        f"Invalid value: {_quote(key)}: {problem}",
                    )
                )
    finalizers = meta.get("finalizers") or []
    for i, fin in enumerate(finalizers):
        for problem in qualified_name_problems(fin):
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    f"metadata.finalizers[{i}]",
                    f"Invalid value: {_quote(fin)}: {problem}",
                )
            )
    if len(set(finalizers)) != len(finalizers) and old is None:
        seen: set[str] = set()
        for i, fin in enumerate(finalizers):
            if fin in seen:
                causes.append(
                    field_cause(
                        "FieldValueDuplicate",
                        f"metadata.finalizers[{i}]",
                        f"Duplicate value: {_quote(fin)}",
                    )
                )
            seen.add(fin)
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "metadata.finalizers",
                'Invalid value: []string{"orphan", "foregroundDeletion"}: finalizer orphan and '
                "foregroundDeletion cannot be both set",
            )
        )
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        base = f"metadata.ownerReferences[{i}]"
        for key in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(key):
                causes.append(
                    field_cause(
                        "FieldValueInvalid",
                        f"{base}.{key}",
                        f'Invalid value: "": {key} must not be empty',
                    )
                )
    controllers = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    if len(controllers) > 1:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "metadata.ownerReferences",
                "Invalid value: []v1.OwnerReference{...}: Only one reference can have Controller "
                "set to true",
            )
        )
    if old is not None and meta.get("uid") and meta.get("uid") != old.get("uid"):
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "metadata.uid",
                f"Invalid value: {_quote(meta['uid'])}: field is immutable",
            )
        )
    return causes


def label_causes(field: str, labels: dict[str, Any]) -> list[Cause]:
    """Label keys and values (ValidateLabels), reported against `field`."""
    causes: list[Cause] = []
    for key, value in labels.items():
        for problem in qualified_name_problems(key):
            causes.append(
                field_cause("FieldValueInvalid", field, f"Invalid value: {_quote(key)}: {problem}")
            )
        value = "" if value is None else str(value)
        if len(value) > 63:
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    field,
                    f"Invalid value: {_quote(value)}: must be no more than 63 characters",
                )
            )
        if not _LVALUE.match(value):
            causes.append(
                field_cause(
                    "FieldValueInvalid", field, f"Invalid value: {_quote(value)}: {LVALUE_MSG}"
                )
            )
    return causes
