"""pods/exec, pods/attach and pods/portforward of the member emulator's pods, as kube-apiserver
presents them (it checks the request and the pod, then joins the client to the kubelet's
stream server, which is played here).

The request must upgrade: a WebSocket (`v5.channel.k8s.io` or `v4.channel.k8s.io` for exec and
attach, `SPDY/3.1+portforward.k8s.io` for port-forward: SPDY carried in the WebSocket's
messages) or SPDY/3.1 (`X-Stream-Protocol-Version: v4.channel.k8s.io` or
`portforward.k8s.io`). What kube-apiserver refuses before that is refused alike: an unknown pod
(404), a container the pod does not have (400, kube's words), a pod not on a node yet (400),
no command or no stream asked for (400); a container that is not running is the kubelet's 404.

Each container has a scratch directory (its filesystem, for what commands write); an exec runs
its command there as a real local process (emulator.kubelet.process). An attach joins the
container's console (emulator.kubelet.console).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from .. import errors
from ..pod_logs import PODS, choose_container, query_flag
from ..registry import JSON, ResourceType
from ..requestinfo import RequestAttributes
from ..storage import Storage
from ..wire import ApiRequest, ApiResponse, RawConnection
from . import channels, portforward
from .channels import V4, V5, SpdyStreams, Wanted, WebSocketStreams
from .console import Consoles
from .ports import PortServers
from .process import run
from .spdy import SpdySession
from .websocket import (
    TunneledBytes,
    WebSocket,
    handshake_headers,
    is_websocket_upgrade,
    offered_protocols,
)

log = logging.getLogger(__name__)

SPDY = "SPDY/3.1"
TUNNELING_PREFIX = "SPDY/3.1+"
SUCCESS: JSON = {"status": "Success"}
# What runs on an exec's or attach's streams; the Status it ends with.
Session = Callable[[channels.Streams], Awaitable[JSON]]
Serve = Callable[[ApiRequest, RequestAttributes], Awaitable[ApiResponse]]


def _text(status: int, message: str) -> ApiResponse:
    return ApiResponse(status, message.encode(), {"content-type": "text/plain; charset=utf-8"})


def _is_spdy_upgrade(req: ApiRequest) -> bool:
    return (
        req.headers.get("upgrade", "").lower() == SPDY.lower()
        and "upgrade" in req.headers.get("connection", "").lower()
    )


def _spdy_protocols(req: ApiRequest) -> list[str]:
    value = req.headers.get("x-stream-protocol-version", "")
    return [p.strip() for p in value.split(",") if p.strip()]


def exit_status(argv: list[str], code: int) -> JSON:
    if code == 0:
        return SUCCESS
    return {
        "status": "Failure",
        "message": (
            "command terminated with non-zero exit code: error executing command "
            f"[{' '.join(argv)}], exit code {code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


class KubeletStreams:
    """The three subresources over one set of containers (scratch directories, consoles and
    port servers), released by `aclose`."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.ports = PortServers()
        self._root: Path | None = None
        self._pod_dirs: dict[str, Path] = {}
        self.consoles = Consoles(self.scratch)
        self.exec = _Subresource(self, self._exec)
        self.attach = _Subresource(self, self._attach)
        self.portforward = _Subresource(self, self._portforward)

    def scratch(self, pod: JSON, container: str) -> Path:
        """The container's own directory (made on first use)."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="emulator-containers-"))
        meta = pod["metadata"]
        uid = str(meta.get("uid", ""))
        pod_dir = self._root / f"{meta.get('namespace', '')}_{meta['name']}_{uid[:8]}"
        self._pod_dirs[uid] = pod_dir
        path = pod_dir / container
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    async def _release_gone(self) -> None:
        """What pods that are gone left: their directories, consoles and port servers (the
        kubelet removes a deleted pod's containers; here it happens at the next request)."""
        present = {str(p["metadata"].get("uid", "")) for p in self.storage.list(PODS)}
        for uid in (self.consoles.uids() | self.ports.uids() | set(self._pod_dirs)) - present:
            await self.consoles.forget(uid)
            await self.ports.forget(uid)
            gone = self._pod_dirs.pop(uid, None)
            if gone is not None:
                shutil.rmtree(gone, ignore_errors=True)

    def environment(self, pod: JSON, container: str, home: Path) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "HOSTNAME": str(pod["metadata"]["name"]),
        }
        for spec in (pod.get("spec") or {}).get("containers") or []:
            if spec.get("name") == container:
                for var in spec.get("env") or []:
                    if isinstance(var.get("value"), str):
                        env[str(var["name"])] = var["value"]
        return env

    async def aclose(self) -> None:
        await self.consoles.aclose()
        await self.ports.aclose()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    # --- the checks kube-apiserver makes before it connects to the kubelet -------------

    def _pod(self, attrs: RequestAttributes) -> JSON:
        pod = self.storage.get(PODS, attrs.namespace, attrs.name)
        if pod is None:
            raise errors.not_found("", "pods", attrs.name)
        if not (pod.get("spec") or {}).get("nodeName"):
            raise errors.bad_request(f"pod {attrs.name} does not have a host assigned")
        return pod

    def _running_container(self, pod: JSON, req: ApiRequest) -> str | ApiResponse:
        container = choose_container(pod, (req.query.get("container") or [""])[0])
        for entry in (pod.get("status") or {}).get("containerStatuses") or []:
            if entry.get("name") == container and "running" in (entry.get("state") or {}):
                return container
        return _text(404, f'container not found ("{container}")')

    @staticmethod
    def _wanted(req: ApiRequest) -> Wanted:
        wanted = Wanted(
            stdin=query_flag(req, "stdin"),
            stdout=query_flag(req, "stdout"),
            stderr=query_flag(req, "stderr"),
            tty=query_flag(req, "tty"),
        )
        if not (wanted.stdin or wanted.stdout or wanted.stderr):
            raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
        return wanted

    # --- exec and attach ------------------------------------------------------------------

    async def _exec(self, req: ApiRequest, attrs: RequestAttributes) -> ApiResponse:
        pod = self._pod(attrs)
        argv = req.query.get("command") or []
        if not argv:
            raise errors.bad_request("you must specify at least one command for the container")
        found = self._running_container(pod, req)
        if isinstance(found, ApiResponse):
            return found
        container = found
        wanted = self._wanted(req)
        home = self.scratch(pod, container)
        env = self.environment(pod, container, home)

        async def session(streams: channels.Streams) -> JSON:
            code = await run(
                argv, home, env, streams,
                stdin=wanted.stdin, stderr=wanted.stderr and not wanted.tty, tty=wanted.tty,
            )  # fmt: skip
            return exit_status(argv, code)

        return self._upgrade_channels(req, wanted, session)

    async def _attach(self, req: ApiRequest, attrs: RequestAttributes) -> ApiResponse:
        pod = self._pod(attrs)
        found = self._running_container(pod, req)
        if isinstance(found, ApiResponse):
            return found
        container = found
        wanted = self._wanted(req)
        refusal = self.consoles.refusal(pod, container, wanted)
        if refusal is not None:
            return _text(400, refusal)

        async def session(streams: channels.Streams) -> JSON:
            await self.consoles.attach(pod, container, streams, wanted, self.environment)
            return SUCCESS

        return self._upgrade_channels(req, wanted, session)

    def _upgrade_channels(self, req: ApiRequest, wanted: Wanted, session: Session) -> ApiResponse:
        if is_websocket_upgrade(req):
            offered = offered_protocols(req)
            chosen = next((p for p in offered if p in (V5, V4)), None)
            if chosen is None:
                return _text(400, f"unable to upgrade: no supported protocol among {offered}")

            async def over_websocket(raw: RawConnection) -> None:
                streams = WebSocketStreams(WebSocket(raw), chosen)
                await _finish(streams, session)

            return ApiResponse(101, b"", handshake_headers(req, chosen), upgraded=over_websocket)
        if _is_spdy_upgrade(req):
            offered = _spdy_protocols(req)
            if V4 not in offered:
                return _text(403, _unnegotiated(offered, [V4]))

            async def over_spdy(raw: RawConnection) -> None:
                spdy = SpdySession(raw)
                spdy.start()
                try:
                    streams = await SpdyStreams.open(spdy, wanted)
                except (TimeoutError, ConnectionError):
                    await spdy.close()
                    return
                await _finish(streams, session)

            return ApiResponse(101, b"", _spdy_headers(V4), upgraded=over_spdy)
        return _text(400, "Upgrade request required")

    # --- port-forward ---------------------------------------------------------------------

    async def _portforward(self, req: ApiRequest, attrs: RequestAttributes) -> ApiResponse:
        pod = self._pod(attrs)
        if (pod.get("status") or {}).get("phase") != "Running":
            return _text(400, f"pod {attrs.name} is not running")
        ports = self.ports
        tunneled = TUNNELING_PREFIX + portforward.PROTOCOL
        if is_websocket_upgrade(req):
            if tunneled not in offered_protocols(req):
                return _text(400, f"unable to upgrade: {tunneled} was not offered")

            async def over_websocket(raw: RawConnection) -> None:
                socket = WebSocket(raw)
                session = SpdySession(TunneledBytes(socket))
                session.start()
                await portforward.serve(session, pod, ports)
                await socket.close()

            return ApiResponse(101, b"", handshake_headers(req, tunneled), upgraded=over_websocket)
        if _is_spdy_upgrade(req):
            offered = _spdy_protocols(req)
            if portforward.PROTOCOL not in offered:
                return _text(403, _unnegotiated(offered, [portforward.PROTOCOL]))

            async def over_spdy(raw: RawConnection) -> None:
                session = SpdySession(raw)
                session.start()
                await portforward.serve(session, pod, ports)

            return ApiResponse(101, b"", _spdy_headers(portforward.PROTOCOL), upgraded=over_spdy)
        return _text(400, "Upgrade request required")


async def _finish(streams: channels.Streams, session: Session) -> None:
    """Run the session; its Status to the client when it ends, or the session ended (its
    process killed) when the client goes away first."""
    work = asyncio.ensure_future(session(streams))
    gone = asyncio.ensure_future(streams.gone.wait())
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
    if work.cancelled():
        await streams.finish({"status": "Failure", "message": "the client went away"})
        return
    exc = work.exception()
    if exc is not None:  # the stream server reports it, as the kubelet does, and goes on
        log.error("kubelet stream failed", exc_info=exc)
        status = {"status": "Failure", "message": str(exc), "reason": "InternalError", "code": 500}
    else:
        status = work.result()
    with contextlib.suppress(ConnectionError):
        await streams.finish(status)


def _spdy_headers(protocol: str) -> dict[str, str]:
    return {"Connection": "Upgrade", "Upgrade": SPDY, "X-Stream-Protocol-Version": protocol}


def _unnegotiated(offered: list[str], supported: list[str]) -> str:
    return (
        f"unable to upgrade: unable to negotiate protocol: client supports {offered}, "
        f"server supports {supported}"
    )


class _Subresource:
    """One subresource's handler in the API server's signature (GET or POST, as kube)."""

    def __init__(self, owner: KubeletStreams, serve: Serve) -> None:
        self.owner = owner
        self._serve = serve

    async def __call__(
        self, _api: object, req: ApiRequest, attrs: RequestAttributes, _rt: ResourceType
    ) -> ApiResponse:
        if req.method not in ("GET", "POST"):
            raise errors.method_not_allowed()
        await self.owner._release_gone()
        return await self._serve(req, attrs)

    async def aclose(self) -> None:
        await self.owner.aclose()
