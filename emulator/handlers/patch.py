"""PATCH: JSON patch, merge patch, strategic merge patch, and server-side apply (which may
create the object); the patched object then takes the update's path."""

from __future__ import annotations

from typing import Any

from .. import errors
from ..errors import ApiError, field_cause
from ..registry import JSON, ResourceType
from ..storage import Stored
from ..wire import ApiRequest, ApiResponse
from .backend import Backend, copy_json, field_meta
from .body import (
    PATCH_APPLY,
    PATCH_JSON,
    PATCH_MERGE,
    PATCH_STRATEGIC,
    check_type,
    check_url_identity,
    parse_body,
)
from .context import WriteCtx
from .create import Creates
from .subresources import Scales
from .update import Updates


class Patches:
    def __init__(
        self, backend: Backend, creates: Creates, updates: Updates, scales: Scales
    ) -> None:
        self.backend = backend
        self.storage = backend.storage
        self.creates = creates
        self.updates = updates
        self.scales = scales

    async def patch(
        self, rt: ResourceType, ns: str, name: str, req: ApiRequest, ctx: WriteCtx
    ) -> ApiResponse:
        ct = req.content_type
        allowed = (PATCH_JSON, PATCH_MERGE, PATCH_APPLY) + (
            (PATCH_STRATEGIC,) if rt.strategic_merge else ()
        )
        if ct not in allowed:
            if not rt.strategic_merge:
                raise ApiError(
                    415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(allowed)}",
                )  # fmt: skip
            raise errors.unsupported_media_type(ct)
        force_text = req.param("force")
        if force_text is not None and ct != PATCH_APPLY:
            raise errors.invalid(
                "meta.k8s.io", "PatchOptions", "",
                [field_cause("FieldValueForbidden", "force",
                             "Forbidden: may not be specified for non-apply patch")],
            )  # fmt: skip
        if ct == PATCH_APPLY and not req.param("fieldManager"):
            raise errors.invalid(
                "meta.k8s.io", "PatchOptions", "",
                [field_cause("FieldValueRequired", "fieldManager",
                             "Required value: is required for apply patch")],
            )  # fmt: skip
        patch = parse_body(req)
        stored = self.storage.get_stored(rt.group_resource, ns, name)
        force = force_text is not None and force_text.lower() in ("true", "1", "")
        if ctx.subresource == "scale":
            return await self.scales.patch_scale(rt, ns, name, stored, patch, ct, ctx)
        if stored is None:
            if ct != PATCH_APPLY or ctx.subresource:
                raise errors.not_found(rt.group, rt.resource, name)
            applied = check_type(rt, patch)
            _check_apply_identity(rt, applied, ns, name)
            engine = self.backend.engine("apply")
            created = engine(
                None, applied, manager=ctx.manager, force=force, meta=field_meta(rt),
                api_version=rt.api_version, subresource="", now=self.backend.now(),
            )  # fmt: skip
            obj = await self.creates.admit_create(rt, ns, created, ctx)
            return self.backend.respond_obj(rt, obj, 201, ctx)

        def patched(live: Stored) -> JSON:
            if ct == PATCH_APPLY:
                _check_apply_precondition(rt, patch, live)
            new = self._patched(rt, live.obj, patch, ct, ctx, force)
            meta = new.get("metadata") if isinstance(new, dict) else None
            if not isinstance(meta, dict):
                raise errors.bad_request("metadata: expected an object")
            check_url_identity(rt, ns, name, meta, empty_matches=False)
            meta["name"] = name
            return new

        result, code = await self.updates.admit_update(
            rt, stored, patched(stored), ctx, patched=True, applied=ct == PATCH_APPLY,
            remake=patched,
        )  # fmt: skip
        return self.backend.respond_obj(rt, result, code, ctx)

    def _patched(
        self, rt: ResourceType, live: JSON, patch: Any, ct: str, ctx: WriteCtx, force: bool
    ) -> JSON:
        current = copy_json(live)
        current["apiVersion"] = rt.api_version
        if ct == PATCH_JSON:
            if not isinstance(patch, list):
                raise errors.bad_request(
                    "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
                )
            return self.backend.engine("json_patch")(current, patch)
        if ct == PATCH_MERGE:
            return self.backend.engine("merge_patch")(current, patch)
        if ct == PATCH_STRATEGIC:
            return self.backend.engine("strategic")(current, patch, field_meta(rt))
        applied = check_type(rt, patch)
        _check_apply_identity(
            rt, applied, live["metadata"].get("namespace", ""), live["metadata"]["name"]
        )
        return self.backend.engine("apply")(
            current, applied, manager=ctx.manager, force=force, meta=field_meta(rt),
            api_version=rt.api_version, subresource=ctx.subresource, now=self.backend.now(),
        )  # fmt: skip


def _check_apply_precondition(rt: ResourceType, applied: Any, live: Stored) -> None:
    """A resourceVersion in an apply configuration is a precondition, as in an update: the
    merged object carries it, and kube-apiserver's storage refuses a version that is not the
    stored one (409, the object has been modified)."""
    meta = applied.get("metadata") if isinstance(applied, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if rv and str(rv) != str(live.rv):
        name = live.obj["metadata"]["name"]
        raise errors.conflict(rt.group, rt.resource, name, errors.STALE_OBJECT)


def _check_apply_identity(rt: ResourceType, applied: JSON, ns: str, name: str) -> None:
    if not applied.get("apiVersion") or not applied.get("kind"):
        raise errors.bad_request(
            "invalid object type: "
            + ("apiVersion" if not applied.get("apiVersion") else "kind")
            + " must be set in an apply patch"
        )
    meta = applied.get("metadata") or {}
    check_url_identity(rt, ns, name, meta, empty_matches=True)
