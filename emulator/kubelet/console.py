"""What pods/attach joins: an emulated container's main process, its console.

The process is the container's `command` and `args` (a shell, `sh`, when the spec names none),
run in the container's scratch directory when the first attach comes, with a terminal when the
container asks for one (`tty`) and its stdin open when it asks for that (`stdin`). Its output
goes to every attach present; what an attach types goes to its stdin. With `stdinOnce`, the
first attach that ends its input ends the process's input too, as the kubelet closes it. An
attach lasts until the process exits (the next attach starts it again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..registry import JSON
from .channels import Streams, Wanted
from .process import run

Environment = Callable[[JSON, str, Path], dict[str, str]]


def _spec(pod: JSON, container: str) -> JSON:
    for spec in (pod.get("spec") or {}).get("containers") or []:
        if spec.get("name") == container:
            return dict(spec)
    return {}


class _Console:
    """One running main process and the attaches present (a `Streams` to `process.run`)."""

    def __init__(self) -> None:
        self.attached: set[Any] = set()
        self.resizes: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self._stdin: asyncio.Queue[bytes] = asyncio.Queue()
        self.done = asyncio.Event()
        self.gone = asyncio.Event()  # the console outlives every attach
        self.task: asyncio.Task[int] | None = None

    async def read_stdin(self) -> bytes:
        return await self._stdin.get()

    def type(self, data: bytes) -> None:
        self._stdin.put_nowait(data)

    async def write(self, channel: int, data: bytes) -> None:
        for streams in list(self.attached):
            try:
                await streams.write(channel, data)
            except ConnectionError:
                self.attached.discard(streams)

    async def finish(self, status: dict[str, Any]) -> None:
        return None


class Consoles:
    def __init__(self, scratch: Callable[[JSON, str], Path]) -> None:
        self._scratch = scratch
        self._consoles: dict[tuple[str, str], _Console] = {}

    def refusal(self, pod: JSON, container: str, wanted: Wanted) -> str | None:
        """Why the runtime refuses this attach, if it does."""
        spec = _spec(pod, container)
        if wanted.tty and not spec.get("tty"):
            return f"container {container} did not allocate a TTY"
        return None

    def _console(self, pod: JSON, container: str, environment: Environment) -> _Console:
        key = (str(pod["metadata"].get("uid", "")), container)
        console = self._consoles.get(key)
        if console is not None and not console.done.is_set():
            return console
        console = _Console()
        self._consoles[key] = console
        spec = _spec(pod, container)
        argv = [*(spec.get("command") or ["sh"]), *(spec.get("args") or [])]
        home = self._scratch(pod, container)
        console.task = asyncio.ensure_future(
            run(
                [str(a) for a in argv],
                home,
                environment(pod, container, home),
                console,
                stdin=bool(spec.get("stdin")),
                stderr=True,
                tty=bool(spec.get("tty")),
            )
        )
        console.task.add_done_callback(lambda _: console.done.set())
        return console

    async def attach(
        self, pod: JSON, container: str, streams: Streams, wanted: Wanted,
        environment: Environment,
    ) -> None:  # fmt: skip
        spec = _spec(pod, container)
        console = self._console(pod, container, environment)
        console.attached.add(streams)
        helpers: list[asyncio.Task[None]] = []

        async def typing() -> None:
            while data := await streams.read_stdin():
                console.type(data)
            if spec.get("stdinOnce"):
                console.type(b"")

        async def resizing() -> None:
            while True:
                console.resizes.put_nowait(await streams.resizes.get())

        if wanted.stdin and spec.get("stdin"):
            helpers.append(asyncio.ensure_future(typing()))
        if wanted.tty:
            helpers.append(asyncio.ensure_future(resizing()))
        try:
            await console.done.wait()
        finally:
            console.attached.discard(streams)
            for helper in helpers:
                helper.cancel()

    def uids(self) -> set[str]:
        return {uid for uid, _ in self._consoles}

    async def forget(self, uid: str) -> None:
        """End the consoles of a pod that is gone."""
        for key in [k for k in self._consoles if k[0] == uid]:
            task = self._consoles.pop(key).task
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def aclose(self) -> None:
        tasks = [c.task for c in self._consoles.values() if c.task is not None]
        self._consoles.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
