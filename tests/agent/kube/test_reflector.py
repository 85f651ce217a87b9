from __future__ import annotations

import asyncio
from typing import Any

from agent.kube.reflector import HandlerFuncs, Reflector
from agent.kube.resources import CONFIGMAPS
from agent.kube.store import drop_managed_fields
from tests.agent.kube.fakeapi import FakeApi, make_client, status, wait_for

PATH = "/api/v1/namespaces/ns/configmaps"


def cm(name: str, rv: str, data: str = "") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": rv,
            "managedFields": [{"manager": "x"}],
        },
        "data": {"v": data},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def handler(self) -> HandlerFuncs:
        return HandlerFuncs(
            add=lambda o: self.events.append(("add", o["metadata"]["name"])),
            update=lambda old, new: self.events.append(("update", new["metadata"]["name"])),
            delete=lambda o: self.events.append(("delete", o["metadata"]["name"])),
        )


async def start(reflector: Reflector) -> asyncio.Task[None]:
    task = asyncio.create_task(reflector.run())
    assert await reflector.wait_synced(5)
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_list_then_watch_resume_from_bookmark() -> None:
    api = FakeApi()
    api.seed(PATH, {"metadata": {"name": "a", "namespace": "ns"}})
    rec = Recorder()
    reflector = Reflector(
        make_client(api),
        CONFIGMAPS,
        namespace="ns",
        transform=drop_managed_fields,
        backoff_initial=0.001,
    )
    reflector.add_handler(rec.handler())
    task = await start(reflector)
    assert rec.events == [("add", "a")]
    q = api.queue(PATH)
    q.put_nowait({"type": "ADDED", "object": cm("b", "200")})
    q.put_nowait({"type": "MODIFIED", "object": cm("a", "201", "x")})
    q.put_nowait({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "250"}}})
    q.put_nowait(None)  # server closes the stream
    await wait_for(lambda: len(api.watch_calls()) >= 2)
    first, second = api.watch_calls()[:2]
    assert first.params["resourceVersion"] == "101"
    assert first.params["allowWatchBookmarks"] == "true"
    assert second.params["resourceVersion"] == "250"
    assert reflector.lists == 1
    assert rec.events == [("add", "a"), ("add", "b"), ("update", "a")]
    stored = reflector.store.get("ns/a")
    assert stored is not None
    assert "managedFields" not in stored["metadata"]
    assert stored["data"] == {"v": "x"}
    q.put_nowait({"type": "DELETED", "object": cm("b", "260")})
    await wait_for(lambda: ("delete", "b") in rec.events)
    assert "ns/b" not in reflector.store
    await stop(task)


async def test_relist_on_watch_410_emits_synthetic_deltas() -> None:
    api = FakeApi()
    for name in ("keep", "change", "gone"):
        api.seed(PATH, {"metadata": {"name": name, "namespace": "ns"}})
    rec = Recorder()
    reflector = Reflector(make_client(api), CONFIGMAPS, namespace="ns", backoff_initial=0.001)
    reflector.add_handler(rec.handler())
    task = await start(reflector)
    rec.events.clear()
    await wait_for(lambda: len(api.watch_calls()) == 1)
    # Meanwhile on the server: one changed, one deleted, one added.
    objs = api.collections[PATH]
    del objs["gone"]
    api.seed(PATH, objs["change"])
    api.seed(PATH, {"metadata": {"name": "new", "namespace": "ns"}})
    api.queue(PATH).put_nowait({"type": "ERROR", "object": status(410, "Expired", "too old")})
    await wait_for(lambda: reflector.lists == 2 and len(rec.events) == 3)
    assert sorted(rec.events) == [("add", "new"), ("delete", "gone"), ("update", "change")]
    assert sorted(reflector.store.keys()) == ["ns/change", "ns/keep", "ns/new"]
    await stop(task)


async def test_watch_request_410_relists_and_other_errors_back_off() -> None:
    api = FakeApi()
    api.seed(PATH, {"metadata": {"name": "a", "namespace": "ns"}})
    failures = {"n": 0}

    def interceptor(call: Any) -> Any:
        import httpx

        if call.params.get("watch") and failures["n"] < 2:
            failures["n"] += 1
            code, reason = (500, "InternalError") if failures["n"] == 1 else (410, "Expired")
            return httpx.Response(code, json=status(code, reason))
        return None

    api.interceptors.append(interceptor)
    reflector = Reflector(make_client(api), CONFIGMAPS, namespace="ns", backoff_initial=0.001)
    task = await start(reflector)
    await wait_for(lambda: len(api.watch_calls()) >= 3)
    assert reflector.lists == 2  # the 500 resumed the watch, the 410 relisted
    await stop(task)


async def test_watch_list_mode() -> None:
    api = FakeApi()
    rec = Recorder()
    reflector = Reflector(make_client(api), CONFIGMAPS, namespace="ns", use_watch_list=True)
    reflector.add_handler(rec.handler())
    q = api.queue(PATH)
    q.put_nowait({"type": "ADDED", "object": cm("a", "5")})
    q.put_nowait(
        {
            "type": "BOOKMARK",
            "object": {
                "metadata": {
                    "resourceVersion": "9",
                    "annotations": {"k8s.io/initial-events-end": "true"},
                }
            },
        }
    )
    task = await start(reflector)
    assert rec.events == [("add", "a")]
    assert reflector.last_resource_version == "9"
    params = api.watch_calls()[0].params
    assert params["sendInitialEvents"] == "true"
    assert params["resourceVersionMatch"] == "NotOlderThan"
    assert not any(c.params.get("watch") is None for c in api.calls)  # no list call
    await stop(task)


class _RecordingClock:
    """Real time, except that sleeps are recorded and return at once."""

    def __init__(self) -> None:
        from agent.kube.clock import RealClock

        self._real = RealClock()
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._real.now()

    def call_later(self, delay: float, callback: Any) -> Any:
        return self._real.call_later(delay, callback)

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        await asyncio.sleep(0)


async def test_cut_streams_resume_without_growing_backoff() -> None:
    import httpx

    api = FakeApi()
    api.seed(PATH, cm("a", "1"))

    class _CutStream(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5"}}}\n'
            raise httpx.ReadError("connection reset by peer")

    cuts = {"n": 0}

    def interceptor(call: Any) -> Any:
        if call.params.get("watch") and cuts["n"] < 4:
            cuts["n"] += 1
            return httpx.Response(200, stream=_CutStream())
        return None

    api.interceptors.append(interceptor)
    clock = _RecordingClock()
    reflector = Reflector(
        make_client(api), CONFIGMAPS, namespace="ns", backoff_initial=0.5, clock=clock
    )
    task = await start(reflector)
    await wait_for(lambda: len(api.watch_calls()) >= 5)
    await stop(task)
    # Each cut came after the stream was established: every retry starts from the initial
    # delay (with jitter up to 2x) instead of doubling towards the maximum.
    assert len(clock.sleeps) >= 4
    assert all(0.5 <= s <= 1.0 for s in clock.sleeps[:4])
    # And each resumed from the bookmark's resourceVersion, without relisting.
    assert reflector.lists == 1
    assert all(c.params.get("resourceVersion") == "5" for c in api.watch_calls()[1:])
