"""DELETE and DELETECOLLECTION: preconditions and propagation policy, admission, and either
the object's removal or, while finalizers remain, its deletionTimestamp."""

from __future__ import annotations

import builtins
import json

from .. import errors, protobuf
from ..admission import Request
from ..errors import ApiError, field_cause
from ..registry import JSON, ResourceType
from ..wire import ApiRequest, ApiResponse, UserInfo
from .backend import Backend, copy_json
from .context import WriteCtx, warnings_on_error
from .selection import matcher, selectors

UNDELETABLE_NAMESPACES = ("default", "kube-system", "kube-public")


def delete_options(req: ApiRequest) -> JSON:
    opts: JSON = {}
    if req.body and req.content_type == protobuf.PROTOBUF:
        # client-go's typed clients send their DeleteOptions as protobuf too.
        opts.update(protobuf.decode_object(req.body, "DeleteOptions"))
    elif req.body:
        try:
            body = json.loads(req.body)
        except ValueError as exc:
            raise errors.bad_request(f"json: cannot unmarshal DeleteOptions: {exc}") from exc
        if isinstance(body, dict):
            opts.update(body)
    for key in ("propagationPolicy", "gracePeriodSeconds", "orphanDependents"):
        value = req.param(key)
        if value is not None and key not in opts:
            opts[key] = value
    if req.query.get("dryRun") and "dryRun" not in opts:
        opts["dryRun"] = req.query["dryRun"]
    policy = opts.get("propagationPolicy")
    causes = []
    if policy is not None and policy not in ("Foreground", "Background", "Orphan"):
        causes.append(
            field_cause(
                "FieldValueNotSupported", "propagationPolicy",
                f'Unsupported value: "{policy}": supported values: "Foreground", '
                '"Background", "Orphan", "nil"',
            )
        )  # fmt: skip
    for value in opts.get("dryRun") or []:
        if value != "All":
            causes.append(
                field_cause(
                    "FieldValueNotSupported", "dryRun",
                    f'Unsupported value: {json.dumps(opts["dryRun"])}: supported values: "All"',
                )
            )  # fmt: skip
    orphan = opts.get("orphanDependents")
    if orphan is not None and policy is not None:
        causes.append(
            field_cause(
                "FieldValueInvalid", "propagationPolicy",
                f'Invalid value: "{policy}": orphanDependents and deletionPropagation cannot '
                "be both set",
            )
        )  # fmt: skip
    if causes:
        raise errors.invalid("meta.k8s.io", "DeleteOptions", "", causes)
    if orphan is not None and policy is None:
        opts["propagationPolicy"] = "Orphan" if str(orphan).lower() == "true" else "Background"
    return opts


class Deletes:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.storage = backend.storage

    async def admit_delete(
        self, rt: ResourceType, ns: str, name: str, opts: JSON, user: UserInfo | None,
        warnings: builtins.list[str],
    ) -> None:  # fmt: skip
        """Webhooks on a DELETE: both kinds see the stored object as oldObject."""
        webhooks = self.backend.webhooks(rt)
        if webhooks is None:
            return
        stored = self.backend.get_obj(rt, ns, name)
        options = {k: v for k, v in opts.items() if k not in ("kind", "apiVersion")}
        if isinstance(options.get("gracePeriodSeconds"), str):
            options["gracePeriodSeconds"] = int(options["gracePeriodSeconds"])
        req = Request(rt, "DELETE", ns, name, "", user, bool(opts.get("dryRun")), options, warnings)
        with warnings_on_error(warnings):
            await webhooks.mutate(req, None, stored.obj)
            await webhooks.validate(req, None, stored.obj)

    async def delete(
        self, rt: ResourceType, ns: str, name: str, opts: JSON, user: UserInfo | None
    ) -> ApiResponse:
        ctx = WriteCtx(user=user)
        await self.admit_delete(rt, ns, name, opts, user, ctx.warnings)
        result, deleted = self.delete_one(rt, ns, name, opts)
        if deleted and not rt.return_deleted_object:
            details: JSON = {"name": name}
            if rt.group:
                details["group"] = rt.group
            details["kind"] = rt.resource
            details["uid"] = result["metadata"].get("uid", "")
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
            return self.backend.respond_json(status, ctx)
        return self.backend.respond_obj(rt, self.backend.out(rt, result), 200, ctx)

    def delete_one(self, rt: ResourceType, ns: str, name: str, opts: JSON) -> tuple[JSON, bool]:
        """Delete or mark for deletion; returns (object, removed-now)."""
        gr = rt.group_resource
        stored = self.backend.get_obj(rt, ns, name)
        obj = stored.obj
        meta = obj["metadata"]
        pre = opts.get("preconditions") or {}
        for key, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            if pre.get(key) and pre[key] != meta.get(key):
                raise errors.conflict(
                    rt.group, rt.resource, name,
                    f"Precondition failed: {label} in precondition: {pre[key]}, {label} in object "
                    f"meta: {meta.get(key)}",
                )  # fmt: skip
        dry = bool(opts.get("dryRun"))
        if gr == ("", "namespaces") and name in UNDELETABLE_NAMESPACES:
            raise ApiError(
                403, "Forbidden",
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                {"name": name, "kind": "namespaces"},
            )  # fmt: skip
        policy = opts.get("propagationPolicy") or "Background"
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
            if "foregroundDeletion" in finalizers:
                finalizers.remove("foregroundDeletion")
        elif policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
            if "orphan" in finalizers:
                finalizers.remove("orphan")
        elif policy == "Background" and opts.get("propagationPolicy"):
            finalizers = [f for f in finalizers if f not in ("orphan", "foregroundDeletion")]
        if meta.get("deletionTimestamp") is None:
            for f in rt.delete_finalizers:
                if f not in finalizers:
                    finalizers.append(f)
        pending = bool(finalizers) or ns_finalizers(rt, obj)
        if not pending:
            if not dry:
                self.storage.delete(gr, ns, name)
            return obj, True
        if meta.get("deletionTimestamp") and finalizers == list(meta.get("finalizers") or []):
            return obj, False
        new = copy_json(obj)
        nmeta = new["metadata"]
        nmeta["finalizers"] = finalizers
        if not nmeta.get("deletionTimestamp"):
            nmeta["deletionTimestamp"] = self.backend.now()
            nmeta["deletionGracePeriodSeconds"] = 0
            if rt.tracks_generation:
                nmeta["generation"] = nmeta.get("generation", 1) + 1
        if gr == ("", "namespaces"):
            new.setdefault("status", {})["phase"] = "Terminating"
        if dry:
            return new, False
        return self.storage.update(gr, new).obj, False

    async def delete_collection(
        self, rt: ResourceType, ns: str, req: ApiRequest, opts: JSON
    ) -> ApiResponse:
        labels, fields = selectors(rt, req)
        match = matcher(rt, labels, fields)
        items = []
        for stored in self.storage.list_stored(rt.group_resource, ns or None):
            obj = stored.obj
            if match is not None and not match(obj):
                continue
            o_ns = obj["metadata"].get("namespace", "")
            try:
                await self.admit_delete(rt, o_ns, obj["metadata"]["name"], opts, req.user, [])
                result, _ = self.delete_one(rt, o_ns, obj["metadata"]["name"], opts)
            except ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            items.append(result)
        return self.backend.list_response(
            rt, items, {"resourceVersion": str(self.storage.revision)}
        )


def ns_finalizers(rt: ResourceType, obj: JSON) -> bool:
    return rt.group_resource == ("", "namespaces") and bool(
        (obj.get("spec") or {}).get("finalizers")
    )
