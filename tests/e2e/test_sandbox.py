"""`make sandbox`, the README's first command, keeps working end to end."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from emulator import sandbox_tunnel, upstream

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


@pytest.mark.timeout(60)
async def test_the_tunnel_sandbox_names_what_is_missing(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != upstream.ENV}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "emulator.sandbox", "--tunnel", "--dir", str(tmp_path / "sandbox"),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env=environment,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 50)
    text = out.decode()
    assert proc.returncode == 1, text
    assert f"karmada-aggregated-apiserver: {upstream.ENV} is not set" in text
    assert f"proxy-server: {upstream.ENV} is not set" in text
    assert "make sandbox ARGS=--tunnel" in text


@pytest.mark.skipif(
    bool(sandbox_tunnel.missing()), reason="; ".join(sandbox_tunnel.missing()) or "-"
)
@pytest.mark.timeout(240)
async def test_the_tunnel_sandbox_reaches_the_undialable_member(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "emulator.sandbox", "--tunnel", "--dir", str(tmp_path / "sandbox"),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 230)
    text = out.decode()
    assert proc.returncode == 0, text[-4000:]
    assert "apiEndpoint https://edge-1.karmada-tunnel.invalid:443 (never resolves)" in text
    assert '"name":"kube-system"' in text
    assert " of shell in pod ops/debug" in text
    assert "hello from debug on the edge\ncommand terminated with exit code 3" in text
    assert "debug   " in text.split("kubectl top pods -n ops")[1]
    assert "the agent stopped with exit code 0" in text
    assert text.rstrip().endswith("sandbox --tunnel: all steps passed")
