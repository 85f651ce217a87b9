"""pytest fixtures for tests against the emulator.

Enable with `pytest_plugins = ["emulator.pytest_plugin"]` in a conftest.py.
Each fixture starts a fresh emulator per test (function scope).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from .emulator import Emulator, run_emulator


@pytest_asyncio.fixture
async def member_emulator() -> AsyncIterator[Emulator]:
    """A `member` profile emulator (cluster name "member1") serving HTTPS on 127.0.0.1."""
    async with run_emulator("member", name="member1") as emu:
        yield emu


@pytest_asyncio.fixture
async def karmada_emulator() -> AsyncIterator[Emulator]:
    """A `karmada` profile emulator (the Karmada control plane) serving HTTPS."""
    async with run_emulator("karmada", name="karmada") as emu:
        yield emu


@pytest.fixture
def emulator_kubeconfig(member_emulator: Emulator, tmp_path: Path) -> Path:
    """Path to an admin kubeconfig (mode 0600) for `member_emulator`."""
    return member_emulator.write_kubeconfig(tmp_path / "member1.kubeconfig")
