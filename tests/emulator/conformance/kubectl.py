"""Run the real kubectl binaries against an emulator, without blocking its event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")
OLDEST, NEWEST = "1.27", "1.33"


def kubectl_path(version: str) -> Path:
    return KUBECTL_DIR / f"kubectl.{version}"


def needs_kubectl(version: str) -> pytest.MarkDecorator:
    """Skip where kubectl `version` is missing on a developer's machine. In CI (the CI
    environment variable set, as `.ci/run` and every CI service set it) the test runs and fails
    when the binary is missing: a conformance test must never pass by not running."""
    missing = not kubectl_path(version).exists() and not os.environ.get("CI")
    return pytest.mark.skipif(missing, reason=f"no kubectl {version} at {kubectl_path(version)}")


def version_params() -> list[object]:
    """The oldest and newest kubectl (see `needs_kubectl`)."""
    return [pytest.param(v, id=f"kubectl{v}", marks=needs_kubectl(v)) for v in (OLDEST, NEWEST)]


def minor(version: str) -> int:
    return int(version.split(".")[1])


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@dataclass
class Kubectl:
    version: str
    kubeconfig: Path

    def __post_init__(self) -> None:
        if not kubectl_path(self.version).exists():
            pytest.fail(f"kubectl {self.version} is not installed at {kubectl_path(self.version)}")

    def argv(self, *args: str) -> list[str]:
        return [str(kubectl_path(self.version)), "--kubeconfig", str(self.kubeconfig), *args]

    async def __call__(self, *args: str, stdin: str | None = None, timeout: float = 30) -> Result:
        proc = await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "KUBECACHEDIR": str(self.kubeconfig.parent / "cache")},
        )
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(stdin.encode() if stdin is not None else None), timeout
            )
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        assert proc.returncode is not None
        return Result(proc.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str | None = None, timeout: float = 30) -> str:
        result = await self(*args, stdin=stdin, timeout=timeout)
        assert result.rc == 0, f"kubectl {' '.join(args)} failed: {result.text}"
        return result.out

    @contextlib.asynccontextmanager
    async def stream(self, *args: str) -> AsyncIterator[LineReader]:
        """A long-running kubectl (e.g. `get --watch`); killed on exit."""
        proc = await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "KUBECACHEDIR": str(self.kubeconfig.parent / "cache")},
        )
        try:
            yield LineReader(proc)
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


class LineReader:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    async def until(self, predicate: Callable[[str], bool], timeout: float = 15) -> str:
        """Read stdout lines until one satisfies `predicate`; return it."""
        assert self.proc.stdout is not None

        async def read() -> str:
            assert self.proc.stdout is not None
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    err = b""
                    if self.proc.stderr is not None:
                        err = await self.proc.stderr.read()
                    raise AssertionError(f"stream ended; lines {self.lines}; stderr {err!r}")
                line = raw.decode().rstrip("\n")
                self.lines.append(line)
                if predicate(line):
                    return line

        return await asyncio.wait_for(read(), timeout)
