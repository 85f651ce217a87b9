"""The shared write context: a write's options (dryRun, fieldManager, fieldValidation), the
warnings it gathers, and how unknown fields are reported under each validation mode."""

from __future__ import annotations

import builtins
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from .. import errors
from ..errors import ApiError, field_cause
from ..registry import JSON, ResourceType
from ..wire import ApiRequest, UserInfo

STRICT_DECODING = "strict decoding error: "


@dataclass
class WriteCtx:
    user: UserInfo | None
    dry_run: bool = False
    manager: str = ""
    validation: str = "Warn"
    warnings: builtins.list[str] = field(default_factory=list)
    subresource: str = ""
    # The request's Create/Update options as given (what admission webhooks are shown).
    options: JSON = field(default_factory=dict)


def write_ctx(req: ApiRequest, kind: str, subresource: str = "") -> WriteCtx:
    """The context of a create, update or patch; `kind` names its options in errors."""
    causes = []
    dry = req.query.get("dryRun", [])
    for value in dry:
        if value != "All":
            causes.append(
                field_cause(
                    "FieldValueNotSupported", "dryRun",
                    f'Unsupported value: {json.dumps(dry)}: supported values: "All"',
                )
            )  # fmt: skip
            break
    validation = req.param("fieldValidation") or "Warn"
    if validation not in ("Ignore", "Warn", "Strict"):
        causes.append(
            field_cause(
                "FieldValueNotSupported", "fieldValidation",
                f'Unsupported value: "{validation}": supported values: "Ignore", "Strict", "Warn"',
            )
        )  # fmt: skip
    manager = req.param("fieldManager") or ""
    if len(manager) > 128:
        causes.append(
            field_cause(
                "FieldValueTooLong", "fieldManager",
                "Too long: may not be more than 128 bytes",
            )
        )  # fmt: skip
    if causes:
        raise errors.invalid("meta.k8s.io", kind, "", causes)
    options: JSON = {"dryRun": dry} if dry else {}
    if manager:
        options["fieldManager"] = manager
    if req.param("fieldValidation"):
        options["fieldValidation"] = validation
    if not manager:
        manager = req.headers.get("user-agent", "").split("/", 1)[0][:128]
    return WriteCtx(
        user=req.user, dry_run=bool(dry), manager=manager, validation=validation,
        subresource=subresource, options=options,
    )  # fmt: skip


def without_warnings(ctx: WriteCtx) -> WriteCtx:
    """The context for fields the user did not write (webhooks' changes): no warnings."""
    return WriteCtx(user=ctx.user, dry_run=ctx.dry_run, manager=ctx.manager, validation="Ignore")


def schema_pass(rt: ResourceType, obj: JSON, ctx: WriteCtx) -> None:
    """Prune unknown fields (an error under Strict, a warning under Warn), then default."""
    schema = rt.schema
    if schema is None:
        return
    unknown = schema.prune(obj)
    if unknown and ctx.validation != "Ignore":
        if ctx.validation == "Strict":
            raise errors.bad_request(
                STRICT_DECODING + ", ".join(f'unknown field "{p}"' for p in unknown)
            )
        ctx.warnings.extend(f'unknown field "{p}"' for p in unknown)
    schema.default(obj)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def warning_header(warnings: builtins.list[str]) -> str:
    return ", ".join(f'299 - "{_escape(w)}"' for w in warnings)


@contextlib.contextmanager
def warnings_on_error(warnings: builtins.list[str]) -> Iterator[None]:
    """A refused write still carries the warnings gathered so far, as kube's do."""
    try:
        yield
    except ApiError as exc:
        if warnings:
            exc.headers["warning"] = warning_header(warnings)
        raise


@contextlib.contextmanager
def decoding(rt: ResourceType) -> Iterator[None]:
    """Unknown fields of a create's or PUT's body are reported as kube's decoder reports
    them; a patch's are found once the patch is applied, and reported without this prefix."""
    try:
        yield
    except ApiError as exc:
        if exc.code == 400 and exc.message.startswith(STRICT_DECODING):
            exc.message = (
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                + exc.message
            )
            exc.args = (exc.message,)
        raise
