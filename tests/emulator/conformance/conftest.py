"""One emulator per test module (tests use their own namespaces), driven by real kubectl."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from emulator.emulator import Emulator, run_emulator

_counter = itertools.count()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emu() -> AsyncIterator[Emulator]:
    async with run_emulator("member", name="member1") as emulator:
        yield emulator


@pytest.fixture(scope="module")
def admin_kubeconfig(emu: Emulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emu.write_kubeconfig(tmp_path_factory.mktemp("kc") / "admin.kubeconfig")


@pytest.fixture
def ns(request: pytest.FixtureRequest) -> str:
    """A namespace name unique within the module's emulator."""
    return f"t{next(_counter)}-{request.node.name.split('[')[-1].rstrip(']').replace('.', '')}"
