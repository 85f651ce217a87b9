"""pods/log of the simulated workloads, read with the real kubectl and checked against kube's
answers for bad options and for containers that have no log yet."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from emulator.controllers import Knobs
from emulator.emulator import Emulator, run_emulator
from tests import polling
from tests.e2e.support import kubectl, kubectl_process

INTERVAL = 0.2
PODS = "/api/v1/namespaces/default/pods"
LINE = re.compile(r"^line (\d+) of (\w+) in pod default/(\S+)$")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")


@pytest_asyncio.fixture
async def member() -> AsyncIterator[Emulator]:
    knobs = Knobs(log_line_interval=INTERVAL, workload_ready_delay=0.05)
    async with run_emulator("member", name="logs", knobs=knobs) as emu:
        yield emu


def pod(name: str, *containers: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": c, "image": "nginx"} for c in containers], **spec},
    }


async def running(emu: Emulator, body: dict[str, Any]) -> dict[str, Any]:
    async with emu.client() as client:
        (await client.post(PODS, json=body)).raise_for_status()
        name = body["metadata"]["name"]
        found = await polling.eventually(
            lambda: client.get(f"{PODS}/{name}"),
            until=lambda r: r.json().get("status", {}).get("phase") == "Running",
            what=f"pod {name} running",
        )
    return dict(found.json())


def numbers(text: str) -> list[int]:
    out = []
    for line in text.splitlines():
        found = LINE.match(line)
        assert found is not None, line
        out.append(int(found.group(1)))
    return out


async def test_kubectl_logs_reads_what_the_container_wrote(
    member: Emulator, tmp_path: Path
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, pod("web", "nginx"))
    await polling.eventually(
        lambda: kubectl(config, "logs", "web"),
        until=lambda out: len(out.splitlines()) >= 5,
        what="five lines written",
    )
    everything = numbers(await kubectl(config, "logs", "web"))
    assert everything == list(range(len(everything)))
    tail = numbers(await kubectl(config, "logs", "web", "--tail=2"))
    assert len(tail) == 2
    assert tail[1] == tail[0] + 1
    assert tail[0] >= everything[-1] - 1
    stamped = (await kubectl(config, "logs", "web", "--timestamps", "--tail=1")).strip()
    when, _, text = stamped.partition(" ")
    assert STAMP.match(when), when
    assert LINE.match(text)
    recent = numbers(await kubectl(config, "logs", "web", "--since=1s"))
    assert 0 < len(recent) <= 1 / INTERVAL + 1
    limited = await kubectl(config, "logs", "web", "--limit-bytes=10")
    assert limited == "line 0 of "


async def test_kubectl_logs_follow_streams_new_lines(member: Emulator, tmp_path: Path) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, pod("web", "nginx"))
    async with kubectl_process(config, "logs", "-f", "web", "--tail=1") as follow:
        assert follow.stdout is not None
        seen = []
        for _ in range(4):
            line = await asyncio.wait_for(follow.stdout.readline(), 10)
            seen += numbers(line.decode())
        assert seen == list(range(seen[0], seen[0] + 4))
        async with member.client() as client:
            gone = await client.delete(f"{PODS}/web", params={"gracePeriodSeconds": "0"})
            gone.raise_for_status()
        # The pod is gone: the stream ends and kubectl exits.
        assert await asyncio.wait_for(follow.wait(), 10) == 0


async def test_which_container(member: Emulator, tmp_path: Path) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, pod("two", "app", "sidecar"))
    # kubectl picks the first container itself ("Defaulted container"); the server, asked
    # without one, wants it named (below).
    first = await polling.eventually(
        lambda: kubectl(config, "logs", "two", "--tail=1"), until=bool, what="a line"
    )
    assert LINE.match(first.strip()).group(2) == "app"  # type: ignore[union-attr]
    await polling.eventually(
        lambda: kubectl(config, "logs", "two", "-c", "sidecar"),
        until=lambda out: bool(out),
        what="a line from the sidecar",
    )
    sidecar = (await kubectl(config, "logs", "two", "-c", "sidecar", "--tail=1")).strip()
    assert LINE.match(sidecar).group(2) == "sidecar"  # type: ignore[union-attr]
    async with member.client() as client:
        unknown = await client.get(f"{PODS}/two/log", params={"container": "nope"})
        previous = await client.get(f"{PODS}/two/log", params={"container": "app", "previous": "1"})
        chosen = await client.get(f"{PODS}/two/log")
    assert (unknown.status_code, unknown.json()["message"]) == (
        400,
        "container nope is not valid for pod two",
    )
    assert (previous.status_code, previous.json()["message"]) == (
        400,
        'previous terminated container "app" in pod "two" not found',
    )
    assert (chosen.status_code, chosen.json()["message"]) == (
        400,
        "a container name must be specified for pod two, choose one of: [app sidecar]",
    )


@pytest.mark.parametrize(
    ("params", "status", "message"),
    [
        ({"tailLines": "x"}, 400, 'strconv.ParseInt: parsing "x": invalid syntax'),
        (
            {"tailLines": "-1"},
            422,
            'PodLogOptions "web" is invalid: tailLines: Invalid value: -1: must be greater '
            "than or equal to 0",
        ),
        (
            {"limitBytes": "0"},
            422,
            'PodLogOptions "web" is invalid: limitBytes: Invalid value: 0: must be greater than 0',
        ),
        (
            {"sinceSeconds": "0"},
            422,
            'PodLogOptions "web" is invalid: sinceSeconds: Invalid value: 0: must be greater '
            "than 0",
        ),
        (
            {"sinceSeconds": "5", "sinceTime": "2024-01-01T00:00:00Z"},
            422,
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ),
        (
            {"sinceTime": "yesterday"},
            400,
            'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" '
            'as "2006"',
        ),
    ],
)
async def test_bad_options_are_refused_as_kube_refuses_them(
    member: Emulator, params: dict[str, str], status: int, message: str
) -> None:
    await running(member, pod("web", "nginx"))
    async with member.client() as client:
        answer = await client.get(f"{PODS}/web/log", params=params)
    assert answer.status_code == status
    assert message in answer.json()["message"]


async def test_no_log_before_the_container_runs() -> None:
    knobs = Knobs(log_line_interval=INTERVAL, workload_ready_delay=3600)
    async with run_emulator("member", name="slow", knobs=knobs) as emu, emu.client() as client:
        unscheduled = pod("nowhere", "app", nodeSelector={"pool": "none"})
        (await client.post(PODS, json=unscheduled)).raise_for_status()
        empty = await client.get(f"{PODS}/nowhere/log")
        assert (empty.status_code, empty.text, empty.headers["content-type"]) == (
            200,
            "",
            "text/plain",
        )
        placed = pod("placed", "app", nodeName="member-node-1")
        (await client.post(PODS, json=placed)).raise_for_status()
        unknown = await client.get(f"{PODS}/placed/log")
        assert (unknown.status_code, unknown.json()["message"]) == (
            400,
            'container "app" in pod "placed" is not available',
        )
        current = (await client.get(f"{PODS}/placed")).json()
        current["status"] = {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "app", "image": "nginx", "imageID": "", "ready": False,
                 "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
            ],
        }  # fmt: skip
        (await client.put(f"{PODS}/placed/status", json=current)).raise_for_status()
        waiting = await client.get(f"{PODS}/placed/log")
        assert (waiting.status_code, waiting.json()["reason"], waiting.json()["message"]) == (
            400,
            "BadRequest",
            'container "app" in pod "placed" is waiting to start: ContainerCreating',
        )
