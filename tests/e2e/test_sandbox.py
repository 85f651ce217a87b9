"""`make sandbox`, the README's first command, keeps working end to end."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from .support import REPO


@pytest.mark.timeout(180)
async def test_sandbox_runs_every_step_and_exits_zero(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "emulator.sandbox", "--dir", str(tmp_path / "sandbox"),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 170)
    text = out.decode()
    assert proc.returncode == 0, text[-4000:]
    for step in ("[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"):
        assert step in text
    # kubectl's views of both sides, as the README promises.
    assert "member1   v1.33.0   Pull   True" in text
    assert "karmada-es-member1   web" in text
    assert "deployment.apps/web   2/2" in text
    # The CronTab reported through the control plane's ResourceInterpreterCustomization.
    assert "as its customization reflects it: {" in text
    assert "'schedule': '0 3 * * *'" in text
    assert "ConfigMap sandbox/web-config is gone from the member and the Work is gone." in text
    assert "the agent stopped on SIGTERM with exit code 0" in text
    assert text.rstrip().endswith("sandbox: all steps passed")
