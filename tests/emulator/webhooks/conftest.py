"""One emulator and one webhook server per module; each test registers its own webhook
configurations through `hooks`, which removes them afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest_asyncio

from emulator.emulator import Emulator, run_emulator
from emulator.pki import CertificateAuthority

from .helpers import Hooks
from .server import WebhookServer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emu() -> AsyncIterator[Emulator]:
    async with run_emulator("member", name="member1") as emulator:
        yield emulator


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[WebhookServer]:
    hooks = WebhookServer(
        CertificateAuthority.generate("webhook-ca"), dns_names=("localhost", "hooks.webhooks.svc")
    )
    await hooks.start()
    yield hooks
    await hooks.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def api(emu: Emulator) -> AsyncIterator[httpx.AsyncClient]:
    async with emu.client() as client:
        yield client


@pytest_asyncio.fixture(loop_scope="module")
async def hooks(api: httpx.AsyncClient, server: WebhookServer) -> AsyncIterator[Hooks]:
    h = Hooks(api, server)
    try:
        yield h
    finally:
        await h.cleanup()
