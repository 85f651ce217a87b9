"""kube-controller-manager's service account token controller (legacy token Secrets).

A Secret of type kubernetes.io/service-account-token naming an existing ServiceAccount
gets data.token, data.ca.crt, data.namespace and the service-account.uid annotation.
A token Secret whose ServiceAccount is missing (or has another uid) is deleted, and
deleting a ServiceAccount deletes its token Secrets.
"""

from __future__ import annotations

import base64
import copy

from emulator.controllers import ControllerContext
from emulator.controllers.informer import Informer, WorkQueue, run_all, split_key
from emulator.errors import ApiError
from emulator.loopback import JSON

TOKEN_TYPE = "kubernetes.io/service-account-token"
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"
SA_UID_ANNOTATION = "kubernetes.io/service-account.uid"


def _b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


async def run(ctx: ControllerContext) -> None:
    secrets = Informer(
        ctx.api,
        "/api/v1/secrets",
        retry_delay=ctx.knobs.retry_delay,
        fieldSelector=f"type={TOKEN_TYPE}",
    )
    accounts = Informer(ctx.api, "/api/v1/serviceaccounts", retry_delay=ctx.knobs.retry_delay)

    async def sync_secret(key: str) -> None:
        namespace, name = split_key(key)
        await _sync_secret(ctx, namespace, name)

    async def sync_account(key: str) -> None:
        if accounts.get(key) is not None:
            return
        namespace, name = split_key(key)
        # The ServiceAccount is gone: its token Secrets go too.
        for secret_key, secret in list(secrets.cache.items()):
            annotations = secret.get("metadata", {}).get("annotations") or {}
            if (
                secret_key.startswith(f"{namespace}/")
                and annotations.get(SA_NAME_ANNOTATION) == name
            ):
                await _delete(ctx, namespace, secret["metadata"]["name"])

    secret_queue = WorkQueue(sync_secret, retry_delay=ctx.knobs.retry_delay)
    account_queue = WorkQueue(sync_account, retry_delay=ctx.knobs.retry_delay)

    def on_secret(event_type: str, obj: JSON) -> None:
        if event_type != "DELETED":
            meta = obj["metadata"]
            secret_queue.add(f"{meta.get('namespace', '')}/{meta['name']}")

    def on_account(event_type: str, obj: JSON) -> None:
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        if event_type == "DELETED":
            account_queue.add(key)
        else:
            # A Secret created before its ServiceAccount waits for it here.
            for secret_key, secret in secrets.cache.items():
                annotations = secret.get("metadata", {}).get("annotations") or {}
                if (
                    secret_key.startswith(f"{meta.get('namespace', '')}/")
                    and annotations.get(SA_NAME_ANNOTATION) == meta["name"]
                ):
                    secret_queue.add(secret_key)

    secrets.add_handler(on_secret)
    accounts.add_handler(on_account)
    await run_all(secrets.run(), accounts.run(), secret_queue.run(), account_queue.run())


async def _delete(ctx: ControllerContext, namespace: str, name: str) -> None:
    try:
        await ctx.api.delete(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    except ApiError as exc:
        if exc.code != 404:
            raise


async def _sync_secret(ctx: ControllerContext, namespace: str, name: str) -> None:
    try:
        secret = await ctx.api.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    except ApiError as exc:
        if exc.code == 404:
            return
        raise
    if secret.get("type") != TOKEN_TYPE or secret["metadata"].get("deletionTimestamp"):
        return
    annotations: dict[str, str] = secret["metadata"].get("annotations") or {}
    sa_name = annotations.get(SA_NAME_ANNOTATION, "")
    wanted_uid = annotations.get(SA_UID_ANNOTATION, "")
    try:
        account = (
            await ctx.api.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa_name}")
            if sa_name
            else None
        )
    except ApiError as exc:
        if exc.code != 404:
            raise
        account = None
    if account is None or (wanted_uid and account["metadata"].get("uid") != wanted_uid):
        await _delete(ctx, namespace, name)
        return
    sa_uid = str(account["metadata"].get("uid", ""))
    data: dict[str, str] = dict(secret.get("data") or {})
    ca_b64 = _b64(ctx.ca.cert_pem)
    needs_ca = data.get("ca.crt") != ca_b64
    needs_namespace = not data.get("namespace")
    needs_token = not data.get("token")
    needs_uid = annotations.get(SA_UID_ANNOTATION) != sa_uid
    if not (needs_ca or needs_namespace or needs_token or needs_uid):
        return
    updated = copy.deepcopy(secret)
    if needs_ca:
        data["ca.crt"] = ca_b64
    if needs_namespace:
        data["namespace"] = _b64(namespace)
    if needs_token:
        data["token"] = _b64(ctx.sa_tokens.issue(namespace, sa_name, sa_uid, name))
    updated["data"] = data
    new_annotations = dict(annotations)
    new_annotations[SA_NAME_ANNOTATION] = sa_name
    new_annotations[SA_UID_ANNOTATION] = sa_uid
    updated["metadata"]["annotations"] = new_annotations
    await ctx.api.update(f"/api/v1/namespaces/{namespace}/secrets/{name}", updated)
