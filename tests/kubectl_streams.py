"""The real kubectl for streaming commands (exec, attach, port-forward): over each wire it
speaks, with its exit code, on a terminal of a given size, forwarding a port."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import struct
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

# kubectl's two wires for exec/attach/port-forward: WebSocket (its default since 1.30/1.31)
# and SPDY/3.1 (what it falls back to, and what these variables force).
WIRES = {
    "websocket": {},
    "spdy": {
        "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false",
        "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false",
    },
}
FORWARDING = re.compile(rb"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)")


async def kubectl_result(
    config: Path, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> tuple[int, str, str]:
    """The real kubectl: its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(config), *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(stdin), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def kubectl_on_terminal(
    config: Path, *args: str, env: dict[str, str], size: tuple[int, int]
) -> tuple[int, bytes]:
    """kubectl with a terminal of `size` (columns, rows) as its stdin and stdout, as a person
    runs `kubectl exec -it`: its exit code and everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(config), *args,
        stdin=slave, stdout=slave, stderr=slave, env={**os.environ, **env},
        start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )  # fmt: skip
    os.close(slave)
    loop = asyncio.get_running_loop()
    output = bytearray()
    done = loop.create_future()

    def readable() -> None:
        try:
            data = os.read(master, 4096)
        except OSError:
            data = b""
        if data:
            output.extend(data)
        elif not done.done():
            loop.remove_reader(master)
            done.set_result(None)

    loop.add_reader(master, readable)
    try:
        code = await asyncio.wait_for(process.wait(), 60)
        await asyncio.wait_for(done, 10)
    finally:
        loop.remove_reader(master)
        os.close(master)
    return code, bytes(output)


@asynccontextmanager
async def forwarded(config: Path, *target: str, env: dict[str, str]) -> AsyncIterator[int]:
    """`kubectl port-forward <target...>` running: the local port it listens on."""
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(config), "port-forward", "--address=127.0.0.1", *target,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        found = FORWARDING.search(line)
        assert found is not None, line
        yield int(found.group(1))
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()
