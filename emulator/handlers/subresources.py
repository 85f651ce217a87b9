"""Subresources: /status, /approval and /finalize change only their part of the object;
/scale reads and writes the replica count of a workload as an autoscaling/v1 Scale."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from .. import errors
from ..admission import Request
from ..errors import field_cause
from ..fieldmeta import NoFieldMeta
from ..registry import JSON, ResourceType
from ..selectors import get_path, label_selector_string
from ..storage import Stored
from ..wire import ApiResponse
from .backend import Backend, copy_json
from .body import PATCH_JSON, PATCH_STRATEGIC
from .context import WriteCtx, warnings_on_error

if TYPE_CHECKING:
    from .update import Updates

# Subresources whose writes change only their own part of the object.
SUBRESOURCE_ONLY = ("status", "approval", "finalize")
_SCALE_KIND = {"group": "autoscaling", "version": "v1", "kind": "Scale"}


def update_subresource(rt: ResourceType, old: JSON, new: JSON, sub: str) -> JSON:
    """`old` with the part of `new` that subresource `sub` writes; metadata other than
    managedFields stays as stored."""
    result = copy_json(old)
    managed = new["metadata"].get("managedFields")
    if managed is not None:
        result["metadata"]["managedFields"] = managed
    if sub == "finalize":
        result.setdefault("spec", {})["finalizers"] = (new.get("spec") or {}).get(
            "finalizers"
        ) or []
    elif sub == "approval":
        result.setdefault("status", {})["conditions"] = (new.get("status") or {}).get(
            "conditions"
        ) or []
    elif rt.resource == "certificatesigningrequests":
        status = dict(new.get("status") or {})
        status["conditions"] = _keep_approval(
            (old.get("status") or {}).get("conditions") or [],
            status.get("conditions") or [],
        )
        result["status"] = status
    elif "status" in new:
        result["status"] = new["status"]
    else:
        result.pop("status", None)
    result["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
    return result


class Scales:
    def __init__(self, backend: Backend, updates: Updates) -> None:
        self.backend = backend
        self.storage = backend.storage
        self.updates = updates

    def scale_of(self, rt: ResourceType, obj: JSON) -> JSON:
        spec = rt.scale
        assert spec is not None
        replicas = get_path(obj, spec.spec_replicas_path.lstrip(".")) or 0
        status: JSON = {"replicas": get_path(obj, spec.status_replicas_path.lstrip(".")) or 0}
        selector = ""
        if spec.selector_from_spec:
            selector = label_selector_string(get_path(obj, "spec.selector"))
        elif spec.label_selector_path:
            selector = get_path(obj, spec.label_selector_path.lstrip(".")) or ""
        if selector:
            status["selector"] = selector
        meta = obj["metadata"]
        out_meta = {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        }
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": out_meta,
            "spec": {"replicas": replicas},
            "status": status,
        }

    def get_scale(self, rt: ResourceType, ns: str, name: str) -> ApiResponse:
        return self.backend.respond_json(self.scale_of(rt, self.backend.get_obj(rt, ns, name).obj))

    async def update_scale(
        self, rt: ResourceType, ns: str, name: str, body: Any, ctx: WriteCtx
    ) -> ApiResponse:
        stored = self.backend.get_obj(rt, ns, name)
        if not isinstance(body, dict):
            raise errors.bad_request("Scale: expected an object")
        return await self._write(rt, stored, body, ctx)

    async def _write(
        self, rt: ResourceType, stored: Stored, scale: JSON, ctx: WriteCtx
    ) -> ApiResponse:
        """A /scale write: webhooks see Scale objects (the new and the stored one's)."""
        name = stored.obj["metadata"]["name"]
        webhooks = self.backend.webhooks(rt)
        old_scale = self.scale_of(rt, stored.obj)
        req = Request(
            rt, "UPDATE", stored.obj["metadata"].get("namespace", ""), name, "scale", ctx.user,
            ctx.dry_run, ctx.options, ctx.warnings, kind=_SCALE_KIND,
        )  # fmt: skip
        if webhooks is not None:
            with warnings_on_error(ctx.warnings):
                mutated, _ = await webhooks.mutate(req, scale, old_scale)
            assert mutated is not None
            scale = mutated
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv and rv != str(stored.rv):
            raise errors.conflict(rt.group, rt.resource, name, errors.STALE_OBJECT)
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid(
                "autoscaling", "Scale", name,
                [field_cause("FieldValueInvalid", "spec.replicas",
                             f"Invalid value: {replicas}: must be greater than or equal to 0")],
            )  # fmt: skip
        assert rt.scale is not None
        new = copy_json(stored.obj)
        _set_path(new, rt.scale.spec_replicas_path.lstrip("."), replicas)
        new["metadata"].pop("resourceVersion", None)
        main_ctx = WriteCtx(
            user=ctx.user, dry_run=ctx.dry_run, manager=ctx.manager, validation="Ignore",
            warnings=ctx.warnings, subresource="",
        )  # fmt: skip
        if webhooks is not None:
            with warnings_on_error(ctx.warnings):
                await webhooks.validate(req, self.scale_of(rt, new), old_scale)
            if self.storage.get_stored(rt.group_resource, req.namespace, name) is not stored:
                raise errors.conflict(rt.group, rt.resource, name, errors.STALE_OBJECT)
        result, _ = self.updates.apply_update(rt, stored, new, main_ctx, patched=True)
        return self.backend.respond_json(self.scale_of(rt, result), ctx)

    async def patch_scale(
        self, rt: ResourceType, ns: str, name: str, stored: Stored | None, patch: Any, ct: str,
        ctx: WriteCtx,
    ) -> ApiResponse:  # fmt: skip
        """A Scale is patched as itself; an apply patch is merged into it."""
        if stored is None:
            raise errors.not_found(rt.group, rt.resource, name)
        current = self.scale_of(rt, stored.obj)
        if ct == PATCH_JSON:
            new = self.backend.engine("json_patch")(current, patch)
        elif ct == PATCH_STRATEGIC:
            new = self.backend.engine("strategic")(current, patch, NoFieldMeta())
        else:
            new = self.backend.engine("merge_patch")(current, patch)
        return await self._write(rt, stored, new, ctx)


def _keep_approval(old: builtins.list[JSON], new: builtins.list[JSON]) -> builtins.list[JSON]:
    """CSR /status may not add or drop Approved/Denied conditions."""
    approval = [c for c in old if c.get("type") in ("Approved", "Denied")]
    others = [c for c in new if c.get("type") not in ("Approved", "Denied")]
    return approval + others


def _set_path(obj: JSON, dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    cur = obj
    for k in keys[:-1]:
        nxt = cur.get(k)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[k] = nxt
        cur = nxt
    cur[keys[-1]] = value
