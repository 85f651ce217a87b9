"""The durable Work record: plain JSON when small, gzip when large, split over several Secrets
when even that is too large; rewritten only when the Work changed; deleted with the Work."""

from __future__ import annotations

import os
from typing import Any

from agent.kube.resources import SECRETS
from agent.sources.work_records import (
    COMPRESS_ABOVE,
    PART_BYTES,
    WorkRecords,
    content_hash,
    decode,
    encode,
    record_name,
)
from emulator.emulator import run_emulator
from tests.agent.controllers.harness import (
    configmap,
    karmada_work,
    kube_client,
)

JsonDict = dict[str, Any]


def work_with(name: str, payload: str) -> JsonDict:
    work = karmada_work(name, [configmap(name, data={"blob": payload})])
    work["metadata"].update(resourceVersion="7", uid="u-1", managedFields=[{"manager": "x"}])
    work["status"] = {"conditions": [{"type": "Applied", "status": "True"}]}
    return work


def without_bookkeeping(work: JsonDict) -> JsonDict:
    meta = {
        k: v for k, v in work["metadata"].items() if k not in ("resourceVersion", "managedFields")
    }
    return {**work, "metadata": meta}


def test_small_work_is_plain_json_and_round_trips() -> None:
    work = work_with("small", "x" * 100)
    encoded = encode(work)
    assert encoded.encoding == "json"
    assert len(encoded.parts) == 1
    assert decode(encoded.encoding, encoded.parts) == without_bookkeeping(work)


def test_large_work_is_gzipped() -> None:
    work = work_with("large", "abc" * COMPRESS_ABOVE)
    encoded = encode(work)
    assert encoded.encoding == "gzip"
    assert len(encoded.parts) == 1
    assert len(encoded.parts[0]) < COMPRESS_ABOVE
    assert decode(encoded.encoding, encoded.parts) == without_bookkeeping(work)


def test_incompressible_work_is_split_under_the_part_size() -> None:
    work = work_with("random", os.urandom(PART_BYTES).hex())
    encoded = encode(work)
    assert encoded.encoding == "gzip"
    assert len(encoded.parts) >= 2
    assert all(len(part) <= PART_BYTES for part in encoded.parts)
    assert decode(encoded.encoding, encoded.parts) == without_bookkeeping(work)


def test_hash_ignores_status_and_bookkeeping() -> None:
    work = work_with("w", "v")
    changed_status = {**work, "status": {"conditions": []}}
    changed_rv = {**work, "metadata": {**work["metadata"], "resourceVersion": "8"}}
    assert content_hash(work) == content_hash(changed_status) == content_hash(changed_rv)
    other = work_with("w", "v2")
    assert content_hash(other) != content_hash(work)


def test_long_work_names_give_valid_secret_names() -> None:
    name = "w" * 253
    assert len(record_name(name, 0)) <= 253
    assert len(record_name(name, 3)) <= 253
    assert record_name(name, 0) != record_name(name, 1)


async def test_save_load_rewrite_and_delete_on_the_member() -> None:
    async with run_emulator("member", name="member1") as member_emu:
        member = kube_client(member_emu)
        try:
            records = WorkRecords(member, "karmada-system", "member1")
            big = work_with("big", os.urandom(PART_BYTES).hex())
            small = work_with("small", "x")
            assert await records.save(big)  # creates the namespace on first use
            assert await records.save(small)
            assert not await records.save({**small, "status": {}})  # status only: unchanged

            listed = await member.list(SECRETS, namespace="karmada-system")
            names = {s["metadata"]["name"] for s in listed["items"]}
            parts = len(encode(big).parts)
            assert {record_name("big", i) for i in range(parts)} <= names
            assert record_name("small", 0) in names

            # A fresh reader (an agent after a restart) gets both Works back.
            loaded = await WorkRecords(member, "karmada-system", "member1").load()
            assert [w["metadata"]["name"] for w in loaded] == ["big", "small"]
            assert loaded[0] == without_bookkeeping(big)

            # Shrinking the Work drops the parts it no longer needs.
            assert await records.save(work_with("big", "now small"))
            listed = await member.list(SECRETS, namespace="karmada-system")
            names = {s["metadata"]["name"] for s in listed["items"]}
            assert record_name("big", 1) not in names
            assert record_name("big", 0) in names

            await records.delete("big")
            await records.delete("small")
            listed = await member.list(SECRETS, namespace="karmada-system")
            assert [
                s["metadata"]["name"] for s in listed["items"] if "record" in s["metadata"]["name"]
            ] == []
            assert await WorkRecords(member, "karmada-system", "member1").load() == []
        finally:
            await member.close()
