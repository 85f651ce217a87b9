"""kube-controller-manager's csrsigning: sign approved CSRs of the kubernetes.io signers."""

from __future__ import annotations

import asyncio
import base64
from datetime import timedelta

from emulator.controllers import ControllerContext, Knobs, run_all, tolerate
from emulator.controllers.csr_rules import (
    RequestRejectedError,
    check_for_signer,
    condition_true,
    is_approved,
    parse_csr_object,
)
from emulator.controllers.subscription import Subscription
from emulator.controllers.workqueue import WorkQueue
from emulator.loopback import JSON
from emulator.timefmt import rfc3339

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CSRS = ("certificates.k8s.io", "certificatesigningrequests")


def signing_duration(knobs: Knobs, expiration_seconds: int | None) -> timedelta:
    """The requested lifetime, capped by the signer's maximum, never under the floor."""
    if expiration_seconds is None:
        return knobs.csr_max_duration
    requested = timedelta(seconds=expiration_seconds)
    if requested > knobs.csr_max_duration:
        return knobs.csr_max_duration
    return max(requested, knobs.csr_min_duration)


async def run(ctx: ControllerContext) -> None:
    csrs = Subscription(ctx.storage, CSRS)

    async def reconcile(name: str) -> None:
        csr = csrs.get(name)
        if csr is None:
            return
        await sign_one(ctx, csr)

    queue = WorkQueue(reconcile, retry_delay=ctx.knobs.retry_delay)
    csrs.add_handler(lambda _t, obj: queue.add(obj["metadata"]["name"]))
    await run_all(csrs.run(), queue.run())


async def sign_one(ctx: ControllerContext, csr: JSON) -> None:
    status: JSON = csr.get("status") or {}
    if status.get("certificate"):
        return
    if not is_approved(csr) or condition_true(csr, "Failed"):
        return
    spec: JSON = csr.get("spec") or {}
    signer = str(spec.get("signerName", ""))
    usages = [str(u) for u in spec.get("usages") or []]
    name = str(csr["metadata"]["name"])
    try:
        request = parse_csr_object(csr)
    except ValueError:
        # kube's signer returns an error here and retries; nothing to sign.
        return
    try:
        if not check_for_signer(signer, request, usages):
            return
    except RequestRejectedError as exc:
        failed = dict(csr)
        new_status = dict(status)
        new_status["conditions"] = [
            *(status.get("conditions") or []),
            {
                "type": "Failed",
                "status": "True",
                "reason": "SignerValidationFailure",
                "message": str(exc),
                "lastUpdateTime": rfc3339(ctx.clock()),
            },
        ]
        failed["status"] = new_status
        await ctx.api.update(f"{CSR_PATH}/{name}/status", failed)
        return
    expiration = spec.get("expirationSeconds")
    lifetime = signing_duration(ctx.knobs, int(expiration) if expiration is not None else None)
    cert_pem = await asyncio.to_thread(
        ctx.ca.sign_csr,
        request.pem.encode(),
        usages=usages,
        lifetime=lifetime,
        backdate=ctx.knobs.csr_backdate,
        now=ctx.clock(),
    )
    signed = dict(csr)
    new_status = dict(status)
    new_status["certificate"] = base64.b64encode(cert_pem).decode()
    signed["status"] = new_status
    await tolerate(ctx.api.update(f"{CSR_PATH}/{name}/status", signed), 404)
