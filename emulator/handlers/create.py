"""CREATE: a new object decoded, given its system fields, defaulted, validated, admitted
(mutating webhooks before, validating after) and stored under a free name."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

from .. import errors
from ..admission import Request
from ..errors import ApiError
from ..registry import JSON, ResourceType
from ..validation import validate_object_meta
from ..wire import ApiResponse
from .backend import Backend, field_meta
from .body import NAMESPACE_MISMATCH, check_type
from .context import WriteCtx, decoding, schema_pass, warnings_on_error, without_warnings

_GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class Creates:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.storage = backend.storage

    async def create(
        self, rt: ResourceType, ns: str, body: Any, ctx: WriteCtx, code: int = 201
    ) -> ApiResponse:
        with decoding(rt):
            obj = await self.admit_create(rt, ns, body, ctx)
        return self.backend.respond_obj(rt, obj, code, ctx)

    async def admit_create(self, rt: ResourceType, ns: str, body: Any, ctx: WriteCtx) -> JSON:
        """Create through admission: mutating webhooks see the decoded object, validating
        webhooks the finished one (uid, generated name), as kube's create handler orders it."""
        webhooks = self.backend.webhooks(rt)
        if webhooks is None:
            return self.create_prepared(rt, self.prepare_new(rt, ns, body, ctx), ctx)
        obj = self.decode_new(rt, ns, body)
        schema_pass(rt, obj, ctx)
        req = Request(
            rt, "CREATE", obj["metadata"].get("namespace", ""), obj["metadata"].get("name") or "",
            "", ctx.user, ctx.dry_run, ctx.options, ctx.warnings,
        )  # fmt: skip
        with warnings_on_error(ctx.warnings):
            mutated, _ = await webhooks.mutate(req, obj, None)
            assert mutated is not None
            obj = self.finish_new(rt, mutated, ctx, quiet=True)
            self.assign_name(rt, obj)
            await webhooks.validate(req, obj, None)
        return self.create_prepared(rt, obj, ctx)

    def prepare_new(self, rt: ResourceType, ns: str, body: Any, ctx: WriteCtx) -> JSON:
        return self.finish_new(rt, self.decode_new(rt, ns, body), ctx)

    def decode_new(self, rt: ResourceType, ns: str, body: Any) -> JSON:
        """A create's body checked and stripped of what the server sets."""
        obj = check_type(rt, body)
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.group + "/" + rt.storage_version if rt.group else rt.storage_version
        meta = obj["metadata"]
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != ns:
                raise errors.bad_request(NAMESPACE_MISMATCH)
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        meta.pop("selfLink", None)
        meta.pop("deletionTimestamp", None)
        meta.pop("deletionGracePeriodSeconds", None)
        meta.pop("resourceVersion", None)
        return obj

    def finish_new(self, rt: ResourceType, obj: JSON, ctx: WriteCtx, quiet: bool = False) -> JSON:
        """System fields, the type's preparation, defaults and validation of a new object.
        `quiet`: the user's fields were checked already (what is left to prune came from
        webhooks, and is dropped without a word)."""
        meta = obj["metadata"]
        now = self.backend.now()
        meta["uid"] = self.backend.fixed_uids.get(
            (rt.group, rt.resource, meta.get("namespace", ""), meta.get("name", ""))
        ) or str(uuid.uuid4())
        meta["creationTimestamp"] = now
        if rt.tracks_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if rt.reset_status_on_create:
            obj.pop("status", None)
            if rt.empty_status is not None:
                obj["status"] = json.loads(json.dumps(rt.empty_status))
        if rt.prepare_create is not None:
            rt.prepare_create(obj, ctx.user)
        schema_pass(rt, obj, without_warnings(ctx) if quiet else ctx)
        causes = validate_object_meta(meta, rt.name_validation, rt.namespaced)
        if rt.schema is not None:
            causes += rt.schema.validate(obj)
        if rt.validate is not None:
            causes += rt.validate(obj, None)
        if causes:
            raise errors.invalid(
                rt.group, rt.kind, meta.get("name") or meta.get("generateName", ""), causes
            )
        if rt.namespaced:
            self._admit_namespace(rt, meta["namespace"], meta.get("name", ""))
        if self.backend.engines.track_update is not None and not meta.get("managedFields"):
            self.backend.engines.track_update(
                None, obj, manager=ctx.manager, meta=field_meta(rt), api_version=rt.api_version,
                subresource=ctx.subresource, now=now,
            )  # fmt: skip
        return obj

    def create_prepared(self, rt: ResourceType, obj: JSON, ctx: WriteCtx) -> JSON:
        self.assign_name(rt, obj)
        if ctx.dry_run:
            return obj
        return self.storage.create(rt.group_resource, obj).obj

    def assign_name(self, rt: ResourceType, obj: JSON) -> None:
        """Generate the name if asked to; refuse a name in use. Then the object takes its
        final form for that name (the type's canonicalize)."""
        meta = obj["metadata"]
        gr = rt.group_resource
        ns = meta.get("namespace", "")
        if not meta.get("name"):
            base = meta["generateName"][:58]
            for _ in range(8):
                candidate = base + "".join(random.choice(_GEN_ALPHABET) for _ in range(5))
                if self.storage.get_stored(gr, ns, candidate) is None:
                    meta["name"] = candidate
                    break
            else:
                raise errors.already_exists(rt.group, rt.resource, candidate)
        elif self.storage.get_stored(gr, ns, meta["name"]) is not None:
            raise errors.already_exists(rt.group, rt.resource, meta["name"])
        if rt.canonicalize is not None:
            rt.canonicalize(obj)

    def _admit_namespace(self, rt: ResourceType, ns: str, name: str) -> None:
        nsobj = self.storage.get(("", "namespaces"), "", ns)
        if nsobj is None:
            raise errors.not_found("", "namespaces", ns)
        if (nsobj.get("status") or {}).get("phase") == "Terminating" or nsobj["metadata"].get(
            "deletionTimestamp"
        ):
            target = f'{rt.qualified} "{name}"' if name else rt.qualified
            details: JSON = {"name": name} if name else {}
            if rt.group:
                details["group"] = rt.group
            details["kind"] = rt.resource
            details["causes"] = [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {ns} is being terminated",
                    "field": "metadata.namespace",
                }
            ]
            raise ApiError(
                403,
                "Forbidden",
                f"{target} is forbidden: unable to create new content in namespace {ns} "
                "because it is being terminated",
                details,
            )
