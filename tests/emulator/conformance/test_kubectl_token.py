"""`kubectl create token` against the emulator, and the token used as kubectl's credential."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from emulator.emulator import Emulator

from .kubectl import Kubectl, minor, version_params

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

UNAUTHORIZED = "error: You must be logged in to the server (Unauthorized)"


@pytest.mark.parametrize("version", version_params())
async def test_create_token_then_use_it(
    version: str, emu: Emulator, admin_kubeconfig: Path, ns: str
) -> None:
    admin = Kubectl(version, admin_kubeconfig)
    await admin.ok("create", "namespace", ns)
    await admin.ok("create", "serviceaccount", "robot", "-n", ns)
    await admin.ok("create", "role", "pod-reader", "-n", ns, "--verb=list", "--resource=pods")
    await admin.ok("create", "rolebinding", "robot-reads", "-n", ns, "--role=pod-reader",
                   f"--serviceaccount={ns}:robot")  # fmt: skip
    token = (await admin.ok("create", "token", "robot", "-n", ns, "--duration=15m")).strip()
    assert re.fullmatch(r"[\w-]+\.[\w-]+\.[\w-]+", token)
    robot = ("--token", token)
    if minor(version) >= 28:
        who = await admin.ok(*robot, "auth", "whoami")
        assert re.search(rf"^Username\s+system:serviceaccount:{ns}:robot$", who, re.M)
        assert re.search(
            rf"^Groups\s+\[system:serviceaccounts system:serviceaccounts:{ns} "
            r"system:authenticated\]$",
            who,
            re.M,
        )
    listed = await admin(*robot, "get", "pods", "-n", ns)
    assert (listed.rc, listed.err.strip()) == (0, f"No resources found in {ns} namespace.")
    forbidden = await admin(*robot, "get", "secrets", "-n", ns)
    assert (forbidden.rc, forbidden.err.strip()) == (1, (
        f'Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:{ns}:'
        f'robot" cannot list resource "secrets" in API group "" in the namespace "{ns}"'
    ))  # fmt: skip
    short = await admin("create", "token", "robot", "-n", ns, "--duration=1m")
    assert (short.rc, short.err.strip()) == (1, (
        'error: failed to create token: TokenRequest.authentication.k8s.io "" is invalid: '
        "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than "
        "10 minutes"
    ))  # fmt: skip
    missing = await admin("create", "token", "nobody", "-n", ns)
    assert (missing.rc, missing.err.strip()) == (
        1, 'error: failed to create token: serviceaccounts "nobody" not found'
    )  # fmt: skip

    # Past its 15 minutes (and kube's one-minute leeway) the token is refused with a 401.
    authenticator = emu.api.authenticator
    real_clock = authenticator.clock
    authenticator.clock = lambda: datetime.now(UTC) + timedelta(minutes=17)
    try:
        expired = await admin(*robot, "get", "pods", "-n", ns)
    finally:
        authenticator.clock = real_clock
    assert (expired.rc, expired.err.strip()) == (1, UNAUTHORIZED)

    # Deleting the ServiceAccount ends the token, and a new one of that name does not revive it.
    await admin.ok("delete", "serviceaccount", "robot", "-n", ns)
    gone = await admin(*robot, "get", "pods", "-n", ns)
    assert (gone.rc, gone.err.strip()) == (1, UNAUTHORIZED)
    await admin.ok("create", "serviceaccount", "robot", "-n", ns)
    recreated = await admin(*robot, "get", "pods", "-n", ns)
    assert (recreated.rc, recreated.err.strip()) == (1, UNAUTHORIZED)
