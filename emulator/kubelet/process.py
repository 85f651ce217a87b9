"""An emulated container's process: a real local process in the container's scratch directory,
its stdin, stdout and stderr carried on an exec's or attach's streams, or a terminal (a pty)
when a TTY was asked for, resized as the client's terminal is.

A command that cannot start is reported as a container runtime reports it: the OCI runtime's
words on the output, exit code 127 when the executable is not found, 126 when it cannot be run.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import pty
import shutil
import signal
import struct
import termios
from collections.abc import Awaitable, Callable
from pathlib import Path

from .channels import STDERR, STDOUT, Streams

READ_SIZE = 32 * 1024
NOT_FOUND, CANNOT_RUN = 127, 126


class StartError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def resolve(command: str, path: str, cwd: Path) -> str:
    """The executable `command` names, looked up on `path` (or from `cwd`) as execvp would."""
    if "/" in command:
        found: str | None = str(cwd / command) if (cwd / command).exists() else None
    else:
        found = shutil.which(command, path=path)
    if found is None:
        where = " in $PATH" if "/" not in command else ""
        reason = "executable file not found" + where if where else "no such file or directory"
        raise StartError(_oci(f'exec: "{command}": {reason}'), NOT_FOUND)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise StartError(_oci(f'exec: "{command}": permission denied'), CANNOT_RUN)
    return found


def _oci(reason: str) -> str:
    return f"OCI runtime exec failed: exec failed: unable to start container process: {reason}: unknown\r\n"


def exit_code(returncode: int) -> int:
    """A signal's death as a container runtime reports it (128 + the signal)."""
    return 128 - returncode if returncode < 0 else returncode


def set_window(fd: int, width: int, height: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


def _controlling_terminal() -> None:
    """In the child (after setsid): make its stdin, the pty's other end, its terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


async def _pump_stdin(streams: Streams, write: Callable[[bytes], Awaitable[None]],
                      end: Callable[[], None]) -> None:  # fmt: skip
    with contextlib.suppress(ConnectionError, BrokenPipeError, OSError):
        while data := await streams.read_stdin():
            await write(data)
    end()


async def run(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    streams: Streams,
    *,
    stdin: bool,
    stderr: bool,
    tty: bool,
) -> int:
    """Run `argv` with its streams on `streams` until it exits; its exit code."""
    try:
        executable = resolve(argv[0], env.get("PATH", os.defpath), cwd)
        if tty:
            return await _run_tty(executable, argv, cwd, env, streams, stdin)
        return await _run_pipes(executable, argv, cwd, env, streams, stdin, stderr)
    except StartError as failure:
        await streams.write(STDOUT if tty else STDERR, str(failure).encode())
        return failure.code


def _spawn_failure(command: str, exc: OSError) -> StartError:
    reason = "exec format error" if exc.errno == errno.ENOEXEC else "permission denied"
    return StartError(_oci(f'exec: "{command}": {reason}'), CANNOT_RUN)


async def _run_pipes(
    executable: str,
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    streams: Streams,
    stdin: bool,
    stderr: bool,
) -> int:
    pipe = asyncio.subprocess.PIPE
    try:
        process = await asyncio.create_subprocess_exec(
            argv[0], *argv[1:], executable=executable, cwd=cwd, env=env,
            stdin=pipe if stdin else asyncio.subprocess.DEVNULL,
            stdout=pipe, stderr=pipe if stderr else asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise _spawn_failure(argv[0], exc) from None

    async def copy(source: asyncio.StreamReader | None, channel: int) -> None:
        if source is None:
            return
        while data := await source.read(READ_SIZE):
            with contextlib.suppress(ConnectionError):
                await streams.write(channel, data)

    async def write_stdin(data: bytes) -> None:
        assert process.stdin is not None
        process.stdin.write(data)
        await process.stdin.drain()

    def end_stdin() -> None:
        if process.stdin is not None:
            process.stdin.close()

    feeder = asyncio.ensure_future(_pump_stdin(streams, write_stdin, end_stdin)) if stdin else None
    try:
        await asyncio.gather(copy(process.stdout, STDOUT), copy(process.stderr, STDERR))
        return exit_code(await process.wait())
    finally:
        if feeder is not None:
            feeder.cancel()
        _kill(process)


async def _run_tty(
    executable: str, argv: list[str], cwd: Path, env: dict[str, str], streams: Streams, stdin: bool
) -> int:
    master, slave = pty.openpty()
    set_window(master, 80, 24)
    try:
        process = await asyncio.create_subprocess_exec(
            argv[0], *argv[1:], executable=executable, cwd=cwd, env={**env, "TERM": "xterm"},
            stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
            preexec_fn=_controlling_terminal,
        )  # fmt: skip
    except OSError as exc:
        os.close(master)
        raise _spawn_failure(argv[0], exc) from None
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    loop = asyncio.get_running_loop()
    output: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            data = os.read(master, READ_SIZE)
        except BlockingIOError:
            return
        except OSError as exc:  # EIO: every holder of the terminal's other end is gone
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            loop.remove_reader(master)
        output.put_nowait(data)

    async def write_stdin(data: bytes) -> None:
        while data:
            try:
                written = os.write(master, data)
            except BlockingIOError:
                await _writable(loop, master)  # the terminal's input queue is full
                continue
            data = data[written:]

    async def resizes() -> None:
        while True:
            width, height = await streams.resizes.get()
            with contextlib.suppress(OSError):
                set_window(master, width, height)
                process.send_signal(signal.SIGWINCH)

    loop.add_reader(master, readable)
    helpers = [asyncio.ensure_future(resizes())]
    if stdin:
        helpers.append(asyncio.ensure_future(_pump_stdin(streams, write_stdin, lambda: None)))
    try:
        while data := await output.get():
            with contextlib.suppress(ConnectionError):
                await streams.write(STDOUT, data)
        return exit_code(await process.wait())
    finally:
        loop.remove_reader(master)
        for helper in helpers:
            helper.cancel()
        os.close(master)
        _kill(process)


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await ready
    finally:
        loop.remove_writer(fd)


def _kill(process: asyncio.subprocess.Process) -> None:
    """End what the command left running (its whole session) once the exec is over."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
