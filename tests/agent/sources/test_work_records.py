"""The durable Work record: a log of gzip-compressed segments in member Secrets, changes coalesced
into at most one write per interval, split over several Secrets when large, compacted into a
snapshot; its guarantee (how far it may lag, what a crash in that window loses) held to."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agent.kube.client import KubeClient
from agent.kube.errors import KubeError
from agent.kube.resources import SECRETS
from agent.sources.work_records import (
    CLUSTER_LABEL,
    HASH_ANNOTATION,
    PART_ANNOTATION,
    PART_BYTES,
    PARTS_ANNOTATION,
    RECORD_KIND,
    RECORD_LABEL,
    SEGMENT_ANNOTATION,
    WorkRecords,
    content_hash,
    decode_segment,
    encode_segment,
    split_parts,
)
from emulator.emulator import Emulator, run_emulator
from tests.agent.controllers.harness import configmap, eventually, karmada_work, kube_client

JsonDict = dict[str, Any]
NAMESPACE = "karmada-system"
CLUSTER = "member1"
# Long enough that nothing is written by the interval during a test step.
LONG = 3600.0


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


@asynccontextmanager
async def member() -> AsyncIterator[tuple[Emulator, KubeClient]]:
    async with run_emulator("member", name=CLUSTER) as emu:
        client = kube_client(emu)
        try:
            yield emu, client
        finally:
            await client.close()


async def recorded(client: KubeClient) -> dict[str, JsonDict]:
    """What an agent starting now would read."""
    works = await WorkRecords(client, NAMESPACE, CLUSTER).load()
    return {w["metadata"]["name"]: w for w in works}


async def segment_secrets(client: KubeClient) -> list[str]:
    listed = await client.list(
        SECRETS, namespace=NAMESPACE, label_selector=f"{RECORD_LABEL}={RECORD_KIND}"
    )
    return sorted(s["metadata"]["name"] for s in listed["items"])


def secret_writes(emu: Emulator) -> int:
    return emu.accounting.counts(verb="create", resource="secrets") + emu.accounting.counts(
        verb="delete", resource="secrets"
    )


def test_segments_round_trip_and_split_under_the_part_size() -> None:
    small = work_with("small", "x" * 100)
    data = encode_segment([("small", b'{"a":1}'), ("gone", None)])
    assert decode_segment(data) == {"small": {"a": 1}, "gone": None}
    incompressible = os.urandom(PART_BYTES).hex().encode()
    parts = split_parts(encode_segment([("big", b'"' + incompressible + b'"')]))
    assert len(parts) >= 2
    assert all(len(part) <= PART_BYTES for part in parts)
    assert content_hash(small) == content_hash({**small, "status": {}})


def test_hash_ignores_status_and_bookkeeping() -> None:
    work = work_with("w", "v")
    changed_status = {**work, "status": {"conditions": []}}
    changed_rv = {**work, "metadata": {**work["metadata"], "resourceVersion": "8"}}
    assert content_hash(work) == content_hash(changed_status) == content_hash(changed_rv)
    assert content_hash(work_with("w", "v2")) != content_hash(work)


async def test_a_burst_of_works_is_written_in_few_secrets_and_read_back() -> None:
    async with member() as (emu, client):
        records = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=0.2)
        works = [work_with(f"w{i}", f"payload {i}") for i in range(200)]
        for work in works:
            assert await records.save(work)
        # Status only (Applied still True): unchanged.
        status = {**works[0]["status"], "manifestStatuses": [{"identifier": {"ordinal": 0}}]}
        assert not await records.save({**works[0], "status": status})
        await records.flush()
        # The first change goes out at once, the rest together: two segments, not 200.
        assert emu.accounting.counts(verb="create", resource="secrets") <= 3
        assert await recorded(client) == {
            w["metadata"]["name"]: without_bookkeeping(w) for w in works
        }
        await records.stop()


async def test_a_change_is_written_within_the_interval_without_waiting_for_more() -> None:
    async with member() as (_, client):
        interval = 0.5
        records = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=interval)
        await records.save(work_with("first", "1"))  # the first write goes out at once
        await eventually(lambda: recorded(client), lambda r: "first" in r, what="first")
        queued_at = time.monotonic()
        await records.save(work_with("second", "2"))
        await eventually(lambda: recorded(client), lambda r: "second" in r, what="second")
        # The bound: the interval plus one write (generous: a shared, busy test machine).
        assert time.monotonic() - queued_at < interval + 5.0
        await records.stop()


async def test_a_crash_in_the_window_loses_only_the_changes_queued_in_it() -> None:
    async with member() as (_, client):
        records = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=LONG)
        before = work_with("kept", "v1")
        dropped = work_with("dropped", "x")
        await records.save(before, wait=True)
        await records.save(dropped, wait=True)
        # Within the interval: queued, not written yet.
        await records.save(work_with("kept", "v2"))
        await records.save(work_with("new", "n"))
        await records.delete("dropped")
        assert records.pending == 3
        # The crash: the process ends without stop() (its writer task dies with it).
        assert records._flusher is not None
        records._flusher.cancel()

        after = await recorded(client)
        # Everything written before the window is there; the window's changes are not.
        assert after == {
            "kept": without_bookkeeping(before),
            "dropped": without_bookkeeping(dropped),
        }


async def test_stop_writes_what_is_queued() -> None:
    async with member() as (_, client):
        records = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=LONG)
        await records.save(work_with("a", "1"), wait=True)
        await records.save(work_with("b", "2"))
        await records.delete("a")
        await records.stop()
        assert set(await recorded(client)) == {"b"}


async def test_wait_returns_once_written_and_raises_while_the_member_refuses() -> None:
    async with member() as (emu, client):
        records = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=LONG)
        await records.save(work_with("a", "1"), wait=True)
        assert "a" in await recorded(client)

        rule = emu.faults.add_error(500, verb="create", resource="secrets")
        with pytest.raises(KubeError):
            await records.save(work_with("b", "2"), wait=True)
        assert records.pending == 1  # kept for the next write
        emu.faults.remove(rule.id)
        await records.flush()
        assert set(await recorded(client)) == {"a", "b"}
        await records.stop()


async def test_an_incomplete_segment_is_left_out_and_its_number_not_reused() -> None:
    async with member() as (_, client):
        records = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=LONG)
        await records.save(work_with("a", "1"), wait=True)
        (first,) = await segment_secrets(client)
        # What a crash while writing a two-part segment leaves: its last part, not its first.
        prefix = first.rsplit("-", 1)[0]
        await client.create(
            SECRETS,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": f"{prefix}-0000000009-p1",
                    "labels": {RECORD_LABEL: RECORD_KIND, CLUSTER_LABEL: CLUSTER},
                    "annotations": {
                        SEGMENT_ANNOTATION: "9",
                        PART_ANNOTATION: "1",
                        PARTS_ANNOTATION: "2",
                        HASH_ANNOTATION: "h",
                    },
                },
                "data": {"records": "AAAA"},
            },
            namespace=NAMESPACE,
        )
        fresh = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=LONG)
        assert [w["metadata"]["name"] for w in await fresh.load()] == ["a"]
        await fresh.save(work_with("c", "3"), wait=True)
        assert f"{prefix}-0000000010" in await segment_secrets(client)
        assert set(await recorded(client)) == {"a", "c"}


async def test_compaction_writes_a_snapshot_and_deletes_the_older_segments() -> None:
    async with member() as (_, client):
        records = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=LONG, max_deltas=4)
        for i in range(4):
            await records.save(work_with(f"w{i}", "1"), wait=True)
        # Four deltas reached the limit: one snapshot is all that is left.
        (snapshot,) = await segment_secrets(client)
        await records.delete("w0", wait=True)
        assert (await segment_secrets(client))[0] == snapshot
        assert set(await recorded(client)) == {"w1", "w2", "w3"}

        for name in ("w1", "w2", "w3"):
            await records.delete(name, wait=True)
        await records.save(work_with("w4", "1"), wait=True)
        await records.delete("w4", wait=True)
        # Everything deleted: compaction leaves an empty log.
        assert await segment_secrets(client) == []
        assert await recorded(client) == {}
        await records.stop()


async def test_a_deleted_record_stays_deleted_and_unwritten_ones_cost_nothing() -> None:
    async with member() as (emu, client):
        records = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=LONG)
        await records.save(work_with("a", "1"), wait=True)
        writes = secret_writes(emu)
        await records.save(work_with("never", "1"))
        await records.delete("never")  # saved and deleted within the interval: no write
        assert records.pending == 0
        assert secret_writes(emu) == writes
        await records.delete("a", wait=True)
        assert await recorded(client) == {}
        await records.stop()


async def test_the_record_says_whether_the_work_was_applied_in_full() -> None:
    """What lets a restarted agent leave objects in place (execution/in_place.py): the record
    holds this very Work (metadata and spec) as applied in full (Applied=True). A change of the
    Applied condition is written, though the content is the same."""
    async with member() as (_, client):
        records = WorkRecords(client, NAMESPACE, CLUSTER, flush_interval=0.2)
        work = work_with("w", "1")
        assert not records.applied_as_recorded(work)  # the record not loaded yet
        await records.load()
        assert not records.applied_as_recorded(work)  # not recorded
        await records.save(work)
        assert records.applied_as_recorded(work)
        assert not records.applied_as_recorded(work_with("w", "2"))  # other manifests
        later = {**work, "metadata": {**work["metadata"], "generation": 2}}
        assert not records.applied_as_recorded(later)
        failed = {**work, "status": {"conditions": [{"type": "Applied", "status": "False"}]}}
        assert await records.save(failed)
        assert not records.applied_as_recorded(work)
        await records.flush()
        reread = WorkRecords(client, NAMESPACE, CLUSTER)
        await reread.load()
        assert not reread.applied_as_recorded(work)
        assert await reread.save(work)
        await reread.flush()
        again = WorkRecords(client, NAMESPACE, CLUSTER)
        await again.load()
        assert again.applied_as_recorded(work)
        await records.stop()
        await reread.stop()
