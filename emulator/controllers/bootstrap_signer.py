"""kube-controller-manager's bootstrapsigner and tokencleaner, for kube-public/cluster-info.

For each valid bootstrap token (a kube-system Secret of type bootstrap.kubernetes.io/token
named bootstrap-token-<id>, not expired, with usage-bootstrap-signing=true) the ConfigMap
gets `jws-kubeconfig-<id>`: a detached JWS (HS256, kid = token id, key = token secret)
over the exact `kubeconfig` string. Signatures of tokens that went away or expired are
removed. The token cleaner deletes expired token Secrets.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import hmac
import json
from datetime import datetime

from emulator.controllers import ControllerContext, run_all, tolerate
from emulator.controllers.subscription import Subscription, object_key
from emulator.controllers.workqueue import WorkQueue
from emulator.loopback import JSON
from emulator.timefmt import parse_time

BOOTSTRAP_TOKEN_TYPE = "bootstrap.kubernetes.io/token"
CLUSTER_INFO_PATH = "/api/v1/namespaces/kube-public/configmaps/cluster-info"
JWS_PREFIX = "jws-kubeconfig-"
_CLUSTER_INFO_KEY = "kube-public/cluster-info"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def detached_jws(content: str, token_id: str, token_secret: str) -> str:
    """Compact JWS with the payload left out: '<header>..<signature>'.

    The protected header is serialised the way go-jose does it (a JSON object with
    sorted keys and no spaces), so signatures match a real control plane's.
    """
    header = json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":"), sort_keys=True)
    signing_input = f"{_b64url(header.encode())}.{_b64url(content.encode())}"
    signature = hmac.new(token_secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{_b64url(header.encode())}..{_b64url(signature)}"


def _decoded(secret: JSON, key: str) -> str:
    value = (secret.get("data") or {}).get(key)
    if value is None:
        return ""
    return base64.b64decode(value).decode(errors="replace")


def token_expiry(secret: JSON) -> datetime | None:
    raw = _decoded(secret, "expiration")
    if not raw:
        return None
    try:
        return parse_time(raw)
    except ValueError:
        return None


def signing_tokens(secrets: list[JSON], now: datetime) -> dict[str, str]:
    """token id -> token secret for every token allowed to sign cluster-info now."""
    tokens: dict[str, str] = {}
    for secret in secrets:
        if secret.get("type") != BOOTSTRAP_TOKEN_TYPE:
            continue
        token_id = _decoded(secret, "token-id")
        token_secret = _decoded(secret, "token-secret")
        if not token_id or not token_secret:
            continue
        if secret["metadata"].get("name") != f"bootstrap-token-{token_id}":
            continue
        expiry = token_expiry(secret)
        if expiry is not None and expiry <= now:
            continue
        if _decoded(secret, "usage-bootstrap-signing") != "true":
            continue
        tokens[token_id] = token_secret
    return tokens


def signed_data(data: dict[str, str], tokens: dict[str, str]) -> dict[str, str]:
    kubeconfig = data.get("kubeconfig", "")
    out = {k: v for k, v in data.items() if not k.startswith(JWS_PREFIX)}
    for token_id, token_secret in sorted(tokens.items()):
        out[JWS_PREFIX + token_id] = detached_jws(kubeconfig, token_id, token_secret)
    return out


def bootstrap_tokens(ctx: ControllerContext) -> Subscription:
    """The bootstrap token Secrets in kube-system."""
    return Subscription(
        ctx.storage,
        ("", "secrets"),
        namespace="kube-system",
        where=lambda s: s.get("type") == BOOTSTRAP_TOKEN_TYPE,
    )


async def run(ctx: ControllerContext) -> None:
    secrets = bootstrap_tokens(ctx)
    cluster_info = Subscription(
        ctx.storage,
        ("", "configmaps"),
        namespace="kube-public",
        where=lambda c: c["metadata"]["name"] == "cluster-info",
    )
    expiry_timers: list[asyncio.TimerHandle] = []

    async def sign(_key: str) -> None:
        now = ctx.clock()
        for timer in expiry_timers:
            timer.cancel()
        expiry_timers.clear()
        all_secrets = secrets.items()
        # Re-sign when the next token expires.
        for secret in all_secrets:
            expiry = token_expiry(secret)
            if expiry is not None and expiry > now:
                delay = (expiry - now).total_seconds()
                expiry_timers.append(
                    asyncio.get_running_loop().call_later(delay, queue.add, _CLUSTER_INFO_KEY)
                )
        configmap = cluster_info.get(_CLUSTER_INFO_KEY)
        if configmap is None or "kubeconfig" not in (configmap.get("data") or {}):
            return
        data: dict[str, str] = configmap.get("data") or {}
        wanted = signed_data(data, signing_tokens(all_secrets, now))
        if wanted == data:
            return
        updated = copy.deepcopy(configmap)
        updated["data"] = wanted
        await ctx.api.update(CLUSTER_INFO_PATH, updated)

    queue = WorkQueue(sign, retry_delay=ctx.knobs.retry_delay)
    secrets.add_handler(lambda _t, _o: queue.add(_CLUSTER_INFO_KEY))
    cluster_info.add_handler(lambda _t, _o: queue.add(_CLUSTER_INFO_KEY))
    try:
        await run_all(secrets.run(), cluster_info.run(), queue.run())
    finally:
        for timer in expiry_timers:
            timer.cancel()


async def run_token_cleaner(ctx: ControllerContext) -> None:
    """Delete bootstrap token Secrets once they expire (kube's tokencleaner)."""
    secrets = bootstrap_tokens(ctx)

    async def clean(key: str) -> None:
        secret = secrets.get(key)
        if secret is None:
            return
        expiry = token_expiry(secret)
        if expiry is None:
            return
        remaining = (expiry - ctx.clock()).total_seconds()
        if remaining > 0:
            queue.add_after(key, remaining)
            return
        name = secret["metadata"]["name"]
        options = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"uid": secret["metadata"].get("uid")},
        }
        path = f"/api/v1/namespaces/kube-system/secrets/{name}"
        await tolerate(ctx.api.delete(path, options), 404, 409)

    queue = WorkQueue(clean, retry_delay=ctx.knobs.retry_delay)

    def on_event(event_type: str, obj: JSON) -> None:
        if event_type != "DELETED":
            queue.add(object_key(obj))

    secrets.add_handler(on_event)
    await run_all(secrets.run(), queue.run())
