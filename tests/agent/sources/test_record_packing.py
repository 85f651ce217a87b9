"""What the Work record holds in memory per Work: its JSON packed against a dictionary of a
typical Work, given back byte for byte whatever the Work, and small for a typical one."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pytest

from agent.sources.record_packing import pack, unpack
from agent.sources.work_records import _Entry, content_hash, recorded_content
from emulator import works
from emulator.works import configmap, control_plane_work, deployment

JsonDict = dict[str, Any]


@pytest.fixture
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Works' ids (permanent ids, uids) the same in every run, so are their sizes."""
    ids = random.Random(34)
    monkeypatch.setattr(works.uuid, "uuid4", lambda: uuid.UUID(int=ids.getrandbits(128)))


def applied_work(index: int, manifests: list[JsonDict]) -> JsonDict:
    """A Work as the agent records it: from the control plane, applied, its status written."""
    work = control_plane_work("member1", f"bench-{index}", manifests)
    work["metadata"].update(
        uid=str(works.uuid.uuid4()),
        resourceVersion=str(1000 + index),
        creationTimestamp="2026-12-06T06:11:41Z",
        generation=1,
    )
    statuses = []
    for ordinal, manifest in enumerate(manifests):
        group, _, version = manifest["apiVersion"].rpartition("/")
        identifier = {"ordinal": ordinal, **({"group": group} if group else {})}
        identifier.update(
            version=version,
            kind=manifest["kind"],
            resource=f"{manifest['kind'].lower()}s",
            namespace=manifest["metadata"]["namespace"],
            name=manifest["metadata"]["name"],
        )
        statuses.append({"identifier": identifier, "health": "Healthy"})
    work["status"] = {
        "conditions": [
            {
                "type": "Dispatching",
                "status": "True",
                "reason": "Dispatching",
                "message": "Work is being dispatched to member clusters.",
                "lastTransitionTime": "2026-12-06T06:11:41Z",
            },
            {
                "type": "Applied",
                "status": "True",
                "reason": "AppliedSuccessful",
                "message": "Manifest has been successfully applied",
                "lastTransitionTime": "2026-12-06T06:11:42Z",
            },
        ],
        "manifestStatuses": statuses,
    }
    return work


def recorded_json(work: JsonDict) -> bytes:
    return json.dumps(recorded_content(work), separators=(",", ":")).encode()


def typical_works() -> list[JsonDict]:
    """The benchmark's Works: one Deployment or one ConfigMap each."""
    return [
        applied_work(0, [deployment("web-0", namespace="bench")]),
        applied_work(1, [configmap("cm-1", {"index": "1"}, namespace="bench")]),
    ]


def unusual_works() -> list[JsonDict]:
    """Works little like the dictionary: no manifests, non-ASCII text, a large manifest."""
    noise = random.Random(7)
    large = {f"key-{i}": f"{noise.getrandbits(64):x}" for i in range(20_000)}
    return [
        applied_work(2, []),
        applied_work(3, [configmap("ünïcode-✓", {"grüße": "日本語 ☃ \U0001f600"})]),
        applied_work(4, [configmap("big", large)]),
        {"kind": "Work", "metadata": {}},
    ]


@pytest.mark.usefixtures("fixed_ids")
def test_every_entry_gives_back_the_json_it_recorded() -> None:
    for work in typical_works() + unusual_works():
        entry = _Entry.of(work, content_hash(work))
        assert entry.raw == recorded_json(work)
        assert json.loads(entry.raw) == recorded_content(work)
    for data in (b"", b"{}", bytes(range(256)) * 64, "ü☃".encode() * 1000):
        assert unpack(pack(data)) == data


@pytest.mark.usefixtures("fixed_ids")
def test_a_typical_work_is_held_in_a_fraction_of_its_json() -> None:
    for work in typical_works():
        raw = recorded_json(work)
        entry = _Entry.of(work, content_hash(work))
        # zlib alone kept ~45% of the JSON (700-800 of 1,600-1,900 bytes); against the
        # dictionary ~270.
        assert len(entry.packed) <= min(320, len(raw) // 5), (len(entry.packed), len(raw))
        assert len(entry.hash) == 16
