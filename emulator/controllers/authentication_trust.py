"""kube-apiserver's cluster-authentication-trust controller.

It keeps kube-system/extension-apiserver-authentication holding what this server trusts
(`ctx.authentication_info`: the client CA and the front proxy's requestheader settings), so that
aggregated API servers can configure their authentication from it. As kube's controller, it
merges instead of overwriting: values already there stay, the server's own are added after them
(header names and allowed names as a de-duplicated JSON array, certificates as one bundle without
duplicates or certificates expired more than five minutes ago), and a deleted ConfigMap comes
back.
"""

from __future__ import annotations

import json
from datetime import timedelta

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from emulator.controllers import ControllerContext, run_all, tolerate
from emulator.controllers.subscription import Subscription
from emulator.controllers.workqueue import WorkQueue
from emulator.loopback import JSON
from emulator.requestheader import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE

PATH = f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps"
_CA_KEYS = ("client-ca-file", "requestheader-client-ca-file")
_dumps = json.JSONEncoder(separators=(",", ":")).encode


def combined(existing: dict[str, str], required: dict[str, str], ctx: ControllerContext) -> JSON:
    """The data kube's controller writes: for each key it knows, what is there first, then what
    is `required` (keys it does not know are not kept)."""
    out: dict[str, str] = {}
    for key in sorted(required):
        if key in _CA_KEYS:
            bundle = _bundle(existing.get(key, "") + required[key], ctx)
            if bundle:
                out[key] = bundle
        else:
            values: list[str] = []
            for source in (existing, required):
                values += [v for v in _names(source.get(key, "")) if v not in values]
            out[key] = _dumps(values)
    return out


def _names(text: str) -> list[str]:
    if not text:
        return []
    try:
        loaded = json.loads(text)
    except ValueError:
        return []
    return [str(v) for v in loaded] if isinstance(loaded, list) else []


def _bundle(pem: str, ctx: ControllerContext) -> str:
    try:
        certs = x509.load_pem_x509_certificates(pem.encode()) if pem.strip() else []
    except ValueError:
        certs = []
    cutoff = ctx.clock() - timedelta(minutes=5)
    kept: list[x509.Certificate] = []
    for cert in certs:
        if cert.not_valid_after_utc > cutoff and cert not in kept:
            kept.append(cert)
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in kept)


async def sync(ctx: ControllerContext) -> None:
    """Write the ConfigMap if it does not hold (at least) what this server trusts."""
    required = ctx.authentication_info
    if not required:
        return
    current = await tolerate(ctx.api.get(f"{PATH}/{CONFIGMAP_NAME}"), 404)
    if current is None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP_NAME, "namespace": CONFIGMAP_NAMESPACE},
            "data": combined({}, required, ctx),
        }
        await ctx.api.create(PATH, body)
        return
    data = combined(dict(current.get("data") or {}), required, ctx)
    if data != (current.get("data") or {}):
        await ctx.api.update(f"{PATH}/{CONFIGMAP_NAME}", {**current, "data": data})


async def run(ctx: ControllerContext) -> None:
    configmap = Subscription(
        ctx.storage,
        ("", "configmaps"),
        namespace=CONFIGMAP_NAMESPACE,
        where=lambda obj: obj["metadata"]["name"] == CONFIGMAP_NAME,
    )
    queue = WorkQueue(lambda _key: sync(ctx), retry_delay=ctx.knobs.retry_delay)
    configmap.add_handler(lambda _type, _obj: queue.add(CONFIGMAP_NAME))
    queue.add(CONFIGMAP_NAME)
    await run_all(configmap.run(), queue.run())
