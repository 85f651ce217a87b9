"""kube-controller-manager's service account token controller (legacy token Secrets).

A Secret of type kubernetes.io/service-account-token naming an existing ServiceAccount
gets data.token, data.ca.crt, data.namespace and the service-account.uid annotation.
A token Secret whose ServiceAccount is missing (or has another uid) is deleted, and
deleting a ServiceAccount deletes its token Secrets.
"""

from __future__ import annotations

import base64
import copy

from emulator.controllers import ControllerContext, run_all, tolerate
from emulator.controllers.subscription import Subscription, object_key, split_key
from emulator.controllers.workqueue import WorkQueue
from emulator.loopback import JSON

TOKEN_TYPE = "kubernetes.io/service-account-token"
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"
SA_UID_ANNOTATION = "kubernetes.io/service-account.uid"


def _b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


async def run(ctx: ControllerContext) -> None:
    secrets = Subscription(
        ctx.storage, ("", "secrets"), where=lambda s: s.get("type") == TOKEN_TYPE
    )
    accounts = Subscription(ctx.storage, ("", "serviceaccounts"))

    async def sync_secret(key: str) -> None:
        secret = secrets.get(key)
        if secret is not None:
            await _sync_secret(ctx, secret, accounts)

    async def sync_account(key: str) -> None:
        if accounts.get(key) is not None:
            return
        # The ServiceAccount is gone: its token Secrets go too.
        namespace, name = split_key(key)
        for secret in _tokens_of(secrets, namespace, name):
            await _delete(ctx, namespace, secret["metadata"]["name"])

    secret_queue = WorkQueue(sync_secret, retry_delay=ctx.knobs.retry_delay)
    account_queue = WorkQueue(sync_account, retry_delay=ctx.knobs.retry_delay)

    def on_secret(event_type: str, obj: JSON) -> None:
        if event_type != "DELETED":
            secret_queue.add(object_key(obj))

    def on_account(event_type: str, obj: JSON) -> None:
        if event_type == "DELETED":
            account_queue.add(object_key(obj))
            return
        # A Secret created before its ServiceAccount waits for it here.
        meta = obj["metadata"]
        for secret in _tokens_of(secrets, meta.get("namespace", ""), meta["name"]):
            secret_queue.add(object_key(secret))

    secrets.add_handler(on_secret)
    accounts.add_handler(on_account)
    await run_all(secrets.run(), accounts.run(), secret_queue.run(), account_queue.run())


def _tokens_of(secrets: Subscription, namespace: str, account: str) -> list[JSON]:
    """The token Secrets in `namespace` that name the ServiceAccount `account`."""
    return [
        s
        for s in secrets.items(namespace)
        if (s["metadata"].get("annotations") or {}).get(SA_NAME_ANNOTATION) == account
    ]


async def _delete(ctx: ControllerContext, namespace: str, name: str) -> None:
    await tolerate(ctx.api.delete(f"/api/v1/namespaces/{namespace}/secrets/{name}"), 404)


async def _sync_secret(ctx: ControllerContext, secret: JSON, accounts: Subscription) -> None:
    if secret["metadata"].get("deletionTimestamp"):
        return
    namespace, name = secret["metadata"].get("namespace", ""), secret["metadata"]["name"]
    annotations: dict[str, str] = secret["metadata"].get("annotations") or {}
    sa_name = annotations.get(SA_NAME_ANNOTATION, "")
    wanted_uid = annotations.get(SA_UID_ANNOTATION, "")
    account = accounts.get(f"{namespace}/{sa_name}") if sa_name else None
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
