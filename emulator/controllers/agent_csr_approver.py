"""karmada-controller-manager's agentcsrapproving: auto-approve karmada-agent CSRs.

Only requests that pass Karmada's agent CSR rules are considered; the requester must
then be allowed, by a SubjectAccessReview, to create certificatesigningrequests/
selfclusteragent (rotation: the requester is the certificate's subject) or
certificatesigningrequests/clusteragent (bootstrap). Anything else stays Pending.
"""

from __future__ import annotations

import copy
import logging

from emulator.controllers import ControllerContext, run_all
from emulator.controllers.csr_rules import (
    CLIENT_SIGNER,
    ParsedRequest,
    RequestRejectedError,
    check_agent_request,
    parse_csr_object,
)
from emulator.controllers.csr_signer import CSR_PATH, CSRS
from emulator.controllers.subscription import Subscription
from emulator.controllers.workqueue import WorkQueue
from emulator.loopback import JSON
from emulator.timefmt import rfc3339

log = logging.getLogger(__name__)

SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

_RECOGNISERS = (
    (
        "selfclusteragent",
        "Auto approving self karmada agent certificate after SubjectAccessReview.",
    ),
    ("clusteragent", "Auto approving karmada agent certificate after SubjectAccessReview."),
)


def _recognised(subresource: str, csr: JSON, request: ParsedRequest) -> bool:
    spec = csr.get("spec", {})
    if spec.get("signerName") != CLIENT_SIGNER:
        return False
    if subresource == "selfclusteragent" and spec.get("username") != request.common_name:
        return False
    try:
        check_agent_request(request, [str(u) for u in spec.get("usages") or []])
    except RequestRejectedError:
        return False
    return True


async def run(ctx: ControllerContext) -> None:
    csrs = Subscription(ctx.storage, CSRS)

    async def reconcile(name: str) -> None:
        csr = csrs.get(name)
        if csr is not None:
            await approve_one(ctx, csr)

    queue = WorkQueue(reconcile, retry_delay=ctx.knobs.retry_delay)

    def on_event(event_type: str, obj: JSON) -> None:
        if event_type != "DELETED" and obj.get("spec", {}).get("signerName") == CLIENT_SIGNER:
            queue.add(obj["metadata"]["name"])

    csrs.add_handler(on_event)
    await run_all(csrs.run(), queue.run())


async def _allowed(ctx: ControllerContext, csr: JSON, subresource: str) -> bool:
    spec = csr.get("spec", {})
    review_spec: JSON = {
        "user": spec.get("username", ""),
        "groups": list(spec.get("groups") or []),
        "resourceAttributes": {
            "group": "certificates.k8s.io",
            "resource": "certificatesigningrequests",
            "verb": "create",
            "subresource": subresource,
            "version": "*",
        },
    }
    if spec.get("uid"):
        review_spec["uid"] = spec["uid"]
    if spec.get("extra"):
        review_spec["extra"] = spec["extra"]
    review = await ctx.api.create(
        SAR_PATH,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": review_spec,
        },
    )
    return bool(review.get("status", {}).get("allowed"))


async def approve_one(ctx: ControllerContext, csr: JSON) -> bool:
    """Approve `csr` when Karmada's approver would; True if it did."""
    status = csr.get("status") or {}
    if status.get("certificate") or csr["metadata"].get("deletionTimestamp"):
        return False
    types = {c.get("type") for c in status.get("conditions") or []}
    if "Approved" in types or "Denied" in types:
        return False
    try:
        request = parse_csr_object(csr)
    except ValueError:
        return False
    tried: list[str] = []
    for subresource, message in _RECOGNISERS:
        if not _recognised(subresource, csr, request):
            continue
        tried.append(subresource)
        if await _allowed(ctx, csr, subresource):
            approved = copy.deepcopy(csr)
            now = rfc3339(ctx.clock())
            approved.setdefault("status", {})
            approved["status"]["conditions"] = [
                *(status.get("conditions") or []),
                {
                    "type": "Approved",
                    "status": "True",
                    "reason": "AutoApproved",
                    "message": message,
                    "lastUpdateTime": now,
                },
            ]
            name = csr["metadata"]["name"]
            await ctx.api.update(f"{CSR_PATH}/{name}/approval", approved)
            return True
    if tried:
        log.info(
            "CSR %s recognised (%s) but SubjectAccessReview denied", csr["metadata"]["name"], tried
        )
    return False
