"""UPDATE (PUT), and the steps every change of a stored object shares with PATCH: the
resourceVersion precondition, the type's update strategy, validation, admission with retry
on a concurrent write, managed fields, and the write (or the deletion a last finalizer ends)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .. import errors
from ..admission import Request
from ..errors import field_cause
from ..registry import JSON, ResourceType
from ..storage import Stored
from ..validation import validate_object_meta
from ..wire import ApiResponse
from .backend import Backend, copy_json, field_meta
from .body import check_type, check_url_identity
from .context import WriteCtx, decoding, schema_pass, warnings_on_error, without_warnings
from .create import Creates
from .delete import ns_finalizers
from .subresources import SUBRESOURCE_ONLY, update_subresource

# How often an update through admission starts over when the object is written meanwhile.
_UPDATE_ATTEMPTS = 5
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")


class Updates:
    def __init__(self, backend: Backend, creates: Creates) -> None:
        self.backend = backend
        self.storage = backend.storage
        self.creates = creates

    async def update(
        self, rt: ResourceType, ns: str, name: str, body: Any, ctx: WriteCtx
    ) -> ApiResponse:
        obj = check_type(rt, body)
        meta = obj["metadata"]
        check_url_identity(rt, ns, name, meta, empty_matches=True)
        meta["name"] = name
        stored = self.storage.get_stored(rt.group_resource, ns, name)
        if stored is None:
            if rt.allow_create_on_update and not ctx.subresource:
                meta.pop("resourceVersion", None)
                return await self.creates.create(rt, ns, obj, ctx)
            raise errors.not_found(rt.group, rt.resource, name)
        remake = None
        if self.backend.webhooks(rt) is not None:
            body = copy_json(obj)
            remake = lambda _live: copy_json(body)  # noqa: E731
        with decoding(rt):
            result, code = await self.admit_update(rt, stored, obj, ctx, remake=remake)
        return self.backend.respond_obj(rt, result, code, ctx)

    async def admit_update(
        self, rt: ResourceType, stored: Stored, new: JSON, ctx: WriteCtx, *,
        patched: bool = False, applied: bool = False,
        remake: Callable[[Stored], JSON] | None = None,
    ) -> tuple[JSON, int]:  # fmt: skip
        """`apply_update` through admission: mutating webhooks see the updated object as the
        client made it, validating webhooks the prepared and validated one. When the object
        is written meanwhile, the update starts over on the new one (`remake` makes the
        updated object again), as kube-apiserver's retried storage update does."""
        webhooks = self.backend.webhooks(rt)
        if webhooks is None:
            return self.apply_update(rt, stored, new, ctx, patched=patched, applied=applied)
        meta = stored.obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        req = Request(
            rt, "UPDATE", ns, name, ctx.subresource, ctx.user, ctx.dry_run, ctx.options,
            ctx.warnings,
        )  # fmt: skip
        for _ in range(_UPDATE_ATTEMPTS):
            old = stored.obj
            with warnings_on_error(ctx.warnings):
                mutated, changed = await webhooks.mutate(req, new, old)
                assert mutated is not None
                if changed:
                    schema_pass(rt, mutated, without_warnings(ctx))
                checked = self.check_update(rt, stored, mutated, ctx, patched=patched)
                await webhooks.validate(req, checked, old)
            current = self.storage.get_stored(rt.group_resource, ns, name)
            if current is stored:
                return self.finish_update(rt, old, checked, ctx, applied=applied)
            if current is None:
                raise errors.not_found(rt.group, rt.resource, name)
            if remake is None:
                break
            stored, new = current, remake(current)
        raise errors.conflict(rt.group, rt.resource, name, errors.STALE_OBJECT)

    def apply_update(
        self,
        rt: ResourceType,
        stored: Stored,
        new: JSON,
        ctx: WriteCtx,
        *,
        patched: bool = False,
        applied: bool = False,
    ) -> tuple[JSON, int]:
        """The shared tail of PUT and PATCH: preconditions, strategy, validation, write."""
        new = self.check_update(rt, stored, new, ctx, patched=patched)
        return self.finish_update(rt, stored.obj, new, ctx, applied=applied)

    def check_update(
        self, rt: ResourceType, stored: Stored, new: JSON, ctx: WriteCtx, *, patched: bool
    ) -> JSON:
        """Preconditions, the type's update strategy and validation of an update."""
        old = stored.obj
        name = old["metadata"]["name"]
        meta = new["metadata"]
        rv = meta.get("resourceVersion")
        if rv:
            if rv != str(stored.rv):
                raise errors.conflict(rt.group, rt.resource, name, errors.STALE_OBJECT)
        elif not rt.allow_unconditional_update and not patched:
            raise errors.invalid(
                rt.group, rt.kind, name,
                [field_cause("FieldValueInvalid", "metadata.resourceVersion",
                             "Invalid value: 0x0: must be specified for an update")],
            )  # fmt: skip
        new = self._prepare_update(rt, old, new, ctx)
        schema_pass(rt, new, ctx)
        causes = validate_object_meta(
            new["metadata"], rt.name_validation, rt.namespaced, old["metadata"]
        )
        if rt.schema is not None:
            causes += rt.schema.validate(new)
        if rt.validate is not None:
            causes += rt.validate(new, old)
        old_fins = set(old["metadata"].get("finalizers") or [])
        if old["metadata"].get("deletionTimestamp"):
            added = [f for f in new["metadata"].get("finalizers") or [] if f not in old_fins]
            if added:
                causes.append(
                    field_cause(
                        "FieldValueForbidden", "metadata.finalizers",
                        "Forbidden: no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers []string{{{', '.join(json.dumps(a) for a in added)}}}",
                    )
                )  # fmt: skip
        if causes:
            raise errors.invalid(rt.group, rt.kind, name, causes)
        if rt.canonicalize is not None:
            rt.canonicalize(new)
        return new

    def finish_update(
        self, rt: ResourceType, old: JSON, new: JSON, ctx: WriteCtx, *, applied: bool
    ) -> tuple[JSON, int]:
        """Store a checked update (nothing, when it changes nothing)."""
        if _strip_volatile(new) == _strip_volatile(old) and not _sets_managed_fields(old, new):
            return old, 200
        # An apply patch has recorded its own managed fields (operation Apply); tracking it
        # again would add an Update entry for the same manager.
        if self.backend.engines.track_update is not None and not applied:
            self.backend.engines.track_update(
                old, new, manager=ctx.manager, meta=field_meta(rt), api_version=rt.api_version,
                subresource=ctx.subresource, now=self.backend.now(),
            )  # fmt: skip
        return self.commit_update(rt, new, ctx), 200

    def commit_update(self, rt: ResourceType, new: JSON, ctx: WriteCtx) -> JSON:
        meta = new["metadata"]
        gr = rt.group_resource
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not ns_finalizers(rt, new)
        ):
            if ctx.dry_run:
                return new
            self.storage.delete(gr, meta.get("namespace", ""), meta["name"])
            return new
        if ctx.dry_run:
            return new
        return self.storage.update(gr, new).obj

    def _prepare_update(self, rt: ResourceType, old: JSON, new: JSON, ctx: WriteCtx) -> JSON:
        """The type's update strategy: what of `new` the server keeps, and the generation."""
        sub = ctx.subresource
        new["kind"] = rt.kind
        new["apiVersion"] = old.get("apiVersion", rt.api_version)
        old_meta = old["metadata"]
        if sub in SUBRESOURCE_ONLY:
            return update_subresource(rt, old, new, sub)
        meta = new["metadata"]
        meta.pop("selfLink", None)
        for key in _SERVER_META:
            if key in old_meta:
                if key == "uid" and meta.get("uid") and meta["uid"] != old_meta["uid"]:
                    continue
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if rt.namespaced:
            meta["namespace"] = old_meta.get("namespace", "")
        else:
            meta.pop("namespace", None)
        if rt.has("status"):
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if rt.prepare_update is not None:
            rt.prepare_update(new, old)
        if rt.tracks_generation:
            gen = old_meta.get("generation", 1)
            if _spec_changed(rt, old, new):
                gen += 1
            meta["generation"] = gen
        else:
            meta.pop("generation", None)
        return new


def _strip_volatile(obj: JSON) -> JSON:
    meta = {
        k: v
        for k, v in obj.get("metadata", {}).items()
        if k not in ("resourceVersion", "managedFields")
    }
    return {**obj, "metadata": meta}


def _sets_managed_fields(old: JSON, new: JSON) -> bool:
    """A write whose only change is managedFields (kubectl's client-side -> server-side apply
    upgrade) is stored, as kube-apiserver stores it; absent managedFields keep the old ones."""
    meta = new.get("metadata") or {}
    if "managedFields" not in meta:
        return False
    given = meta.get("managedFields")
    return bool(given) and given != (old.get("metadata") or {}).get("managedFields")


def _spec_changed(rt: ResourceType, old: JSON, new: JSON) -> bool:
    for key in set(old) | set(new):
        if key in ("metadata", "status", "kind", "apiVersion"):
            continue
        if old.get(key) != new.get(key):
            return True
    if rt.generation_on_annotations:
        return bool(old["metadata"].get("annotations") != new["metadata"].get("annotations"))
    return False
