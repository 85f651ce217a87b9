"""pods/log for the pods the workload simulator runs, as kube-apiserver and the kubelet answer it.

The simulated container runtime writes one line every `interval` seconds to each running
container's log, from the container's `startedAt` on: line n is written at startedAt + n *
interval and reads "line <n> of <container> in pod <namespace>/<pod>". A log is therefore the
same whenever it is read, and grows with time, so every option has something real to act on:

- `container` (required when the pod has several: 400 naming them, as kube does; an unknown one
  is 400 too), `previous` (400: these containers never restarted);
- `tailLines`, `sinceSeconds` / `sinceTime`, `timestamps` (each line prefixed with its time in
  RFC 3339 with nanoseconds, as the kubelet writes it), `limitBytes`;
- `follow`: the lines so far, then each new one as it is written, until the pod goes.

As kube: options that do not parse are 400, options out of range are 422 (PodLogOptions
invalid), a pod not yet on a node has an empty log, a container that is not running yet is 400
with the kubelet's words ("is waiting to start: ContainerCreating").
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from . import errors
from .errors import field_cause
from .registry import JSON, ResourceType
from .requestinfo import RequestAttributes
from .storage import Storage
from .timefmt import parse_time
from .wire import ApiRequest, ApiResponse

PODS = ("", "pods")
TEXT = {"content-type": "text/plain"}
_RFC3339 = "2006-01-02T15:04:05Z07:00"


@dataclass(frozen=True)
class LogOptions:
    container: str = ""
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    since_seconds: int | None = None
    since_time: float | None = None
    limit_bytes: int | None = None


def query_flag(req: ApiRequest, name: str) -> bool:
    """Go's query-to-bool: absent, "false" and "0" are false; anything else is true."""
    values = req.query.get(name)
    if not values:
        return False
    return not (values[0] == "0" or values[0].lower() == "false")


def _integer(req: ApiRequest, name: str) -> int | None:
    values = req.query.get(name)
    if not values:
        return None
    try:
        return int(values[0])
    except ValueError:
        raise errors.bad_request(
            f'strconv.ParseInt: parsing "{values[0]}": invalid syntax'
        ) from None


def parse_options(req: ApiRequest, pod_name: str) -> LogOptions:
    since_time: float | None = None
    if req.query.get("sinceTime"):
        text = req.query["sinceTime"][0]
        try:
            since_time = parse_time(text).timestamp()
        except ValueError:
            raise errors.bad_request(
                f'parsing time "{text}" as "{_RFC3339}": cannot parse "{text}" as "2006"'
            ) from None
    options = LogOptions(
        container=(req.query.get("container") or [""])[0],
        follow=query_flag(req, "follow"),
        previous=query_flag(req, "previous"),
        timestamps=query_flag(req, "timestamps"),
        tail_lines=_integer(req, "tailLines"),
        since_seconds=_integer(req, "sinceSeconds"),
        since_time=since_time,
        limit_bytes=_integer(req, "limitBytes"),
    )
    causes = []
    if options.tail_lines is not None and options.tail_lines < 0:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "tailLines",
                f"Invalid value: {options.tail_lines}: must be greater than or equal to 0",
            )
        )
    if options.limit_bytes is not None and options.limit_bytes < 1:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "limitBytes",
                f"Invalid value: {options.limit_bytes}: must be greater than 0",
            )
        )
    if options.since_seconds is not None and options.since_time is not None:
        causes.append(
            field_cause(
                "FieldValueForbidden",
                "",
                "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
            )
        )
    elif options.since_seconds is not None and options.since_seconds < 1:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "sinceSeconds",
                f"Invalid value: {options.since_seconds}: must be greater than 0",
            )
        )
    if causes:
        raise errors.invalid("", "PodLogOptions", pod_name, causes)
    return options


def _container_names(spec: JSON, key: str) -> list[str]:
    return [str(c.get("name", "")) for c in spec.get(key) or [] if isinstance(c, dict)]


def choose_container(pod: JSON, wanted: str) -> str:
    """The container whose log is read (kube's validateContainer)."""
    spec = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    regular = _container_names(spec, "containers")
    every = (
        _container_names(spec, "initContainers")
        + regular
        + _container_names(spec, "ephemeralContainers")
    )
    if not wanted:
        if len(regular) == 1:
            return regular[0]
        if not regular:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        raise errors.bad_request(
            f"a container name must be specified for pod {name}, choose one of: [{' '.join(every)}]"
        )
    if wanted not in every:
        raise errors.bad_request(f"container {wanted} is not valid for pod {name}")
    return wanted


def _status_of(pod: JSON, container: str) -> JSON | None:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for entry in status.get(key) or []:
            if isinstance(entry, dict) and entry.get("name") == container:
                return entry
    return None


def running_since(pod: JSON, container: str, previous: bool) -> tuple[float, float | None]:
    """When the container's log started, and when it ended (None while it runs); 400 with the
    kubelet's words when there is no log to read."""
    pod_name = pod["metadata"]["name"]
    where = f'container "{container}" in pod "{pod_name}"'
    entry = _status_of(pod, container)
    if entry is None:
        raise errors.bad_request(f"{where} is not available")
    state = entry.get("state") or {}
    if previous:
        raise errors.bad_request(f"previous terminated {where} not found")
    if "running" in state:
        return parse_time(state["running"]["startedAt"]).timestamp(), None
    if "terminated" in state:
        ended = state["terminated"]
        return (
            parse_time(ended["startedAt"]).timestamp(),
            parse_time(ended["finishedAt"]).timestamp(),
        )
    reason = (state.get("waiting") or {}).get("reason")
    if reason:
        raise errors.bad_request(f"{where} is waiting to start: {reason}")
    raise errors.bad_request(f"{where} is waiting to start - no logs yet")


def stamp(moment: float) -> str:
    """The kubelet's log timestamp: RFC 3339, nine fraction digits, UTC."""
    whole = math.floor(moment)
    nanos = round((moment - whole) * 1e9)
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, 0
    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


class PodLogs:
    """The pods/log subresource over the emulator's storage."""

    def __init__(
        self, storage: Storage, interval: float, clock: Callable[[], float] = time.time
    ) -> None:
        self.storage = storage
        self.interval = interval
        self.clock = clock

    def line(self, pod: JSON, container: str, n: int, started: float, timestamps: bool) -> bytes:
        meta = pod["metadata"]
        text = f"line {n} of {container} in pod {meta.get('namespace', '')}/{meta['name']}\n"
        if timestamps:
            text = f"{stamp(started + n * self.interval)} {text}"
        return text.encode()

    def written(self, started: float, until: float) -> int:
        """How many lines a container started at `started` has written by `until`."""
        return max(0, math.floor((until - started) / self.interval) + 1) if until >= started else 0

    async def __call__(
        self, _api: object, req: ApiRequest, attrs: RequestAttributes, _rt: ResourceType
    ) -> ApiResponse:
        if req.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed()
        name = attrs.name
        options = parse_options(req, name)
        pod = self.storage.get(PODS, attrs.namespace, name)
        if pod is None:
            raise errors.not_found("", "pods", name)
        container = choose_container(pod, options.container)
        if not (pod.get("spec") or {}).get("nodeName"):
            return ApiResponse(200, b"", dict(TEXT))
        started, ended = running_since(pod, container, options.previous)
        now = self.clock()
        count = self.written(started, min(now, ended) if ended is not None else now)
        first = 0
        if options.tail_lines is not None:
            first = max(0, count - options.tail_lines)
        since = options.since_time
        if options.since_seconds is not None:
            since = now - options.since_seconds
        if since is not None:
            first = max(first, math.ceil((since - started) / self.interval))
        uid = pod["metadata"].get("uid")
        lines = self._lines(pod, container, started, first, options, uid, ended, count)
        if not options.follow or ended is not None:
            body = b"".join([chunk async for chunk in lines])
            return ApiResponse(200, body, dict(TEXT))
        return ApiResponse(200, b"", dict(TEXT), stream=lines)

    async def _lines(
        self,
        pod: JSON,
        container: str,
        started: float,
        first: int,
        options: LogOptions,
        uid: str | None,
        ended: float | None,
        count: int,
    ) -> AsyncIterator[bytes]:
        left = options.limit_bytes
        n = first
        while True:
            if n >= count:
                if not options.follow or ended is not None:
                    return
                wait = started + n * self.interval - self.clock()
                if wait > 0:
                    await asyncio.sleep(wait)  # the simulated container writes its next line
                meta = pod["metadata"]
                current = self.storage.get(PODS, meta.get("namespace", ""), meta["name"])
                if current is None or current["metadata"].get("uid") != uid:
                    return
                count = n + 1
            chunk = self.line(pod, container, n, started, options.timestamps)
            if left is not None:
                chunk = chunk[:left]
                left -= len(chunk)
            yield chunk
            if left is not None and left <= 0:
                return
            n += 1
