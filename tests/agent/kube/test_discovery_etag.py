"""Aggregated discovery with ETag / 304 Not Modified: the emulator as kube-apiserver serves it,
and the agent's discovery reusing what it already has."""

from __future__ import annotations

from agent.kube.discovery import DiscoveryCache, api_enablements, discover
from agent.kube.resources import CUSTOM_RESOURCE_DEFINITIONS
from emulator.discovery import AGG_V2
from emulator.emulator import run_emulator
from tests.agent.controllers.harness import crd, eventually, kube_client

ACCEPT = f"{AGG_V2},application/json"


async def test_emulator_answers_if_none_match_with_304_until_discovery_changes() -> None:
    async with run_emulator("member") as emu, emu.client() as http:
        first = await http.get("/apis", headers={"Accept": ACCEPT})
        assert first.status_code == 200
        etag = first.headers["etag"]
        assert etag[0] == etag[-1] == '"'  # a strong ETag, as kube-apiserver's
        again = await http.get("/apis", headers={"Accept": ACCEPT, "If-None-Match": etag})
        assert again.status_code == 304
        assert again.content == b""
        assert again.headers["etag"] == etag
        # /api has a document (and ETag) of its own.
        core = await http.get("/api", headers={"Accept": ACCEPT, "If-None-Match": etag})
        assert core.status_code == 200
        assert core.headers["etag"] != etag
        # A new CRD changes the document: the old ETag no longer matches.
        created = await http.post(CUSTOM_RESOURCE_DEFINITIONS.path(), json=crd())
        assert created.status_code == 201, created.text

        async def answer() -> int:
            response = await http.get("/apis", headers={"Accept": ACCEPT, "If-None-Match": etag})
            return response.status_code

        await eventually(answer, lambda code: code == 200, what="a new discovery document")


async def test_discover_reuses_the_document_on_304() -> None:
    async with run_emulator("member") as emu:
        client = kube_client(emu)
        try:
            cache = DiscoveryCache()
            first = await discover(client, cache)
            emu.accounting.reset()
            second = await discover(client, cache)
            assert cache.not_modified == 2  # /api and /apis
            assert api_enablements(second) == api_enablements(first)
            assert emu.accounting.total() == 2
            # Without a cache, the documents come in full each time.
            assert api_enablements(await discover(client)) == api_enablements(first)
        finally:
            await client.close()
