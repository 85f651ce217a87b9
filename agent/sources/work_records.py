"""The durable record of what the agent applied, kept in the member cluster.

What is recorded of each Work: the Work as last applied (metadata, spec and the status it had,
without write bookkeeping), rewritten only when its content changed (a hash, status left out) or
its Applied condition turned to or from True (whether that apply succeeded in full),
and dropped with the Work. An agent that starts while the control plane is unreachable serves
these Works (agent.offline) until the link returns.

How: a log of segments in Secrets of the agent's own namespace (--karmada-kubeconfig-namespace)
on the member, since manifests may carry Secrets. A segment is a gzip-compressed JSON document
{"works": {name: recorded Work, or null once deleted}}, numbered in order. A snapshot segment
holds every recorded Work; each delta after it holds what changed since; a reader starts from
the latest complete snapshot and folds the deltas after it, the later entry winning. A segment
larger than PART_BYTES is split over several Secrets, written last part first, so a reader
never finds a first part whose others are missing; a segment without its first part is
incomplete (a crash while writing it) and is left out. Once the deltas outweigh the snapshot
(or are too many), the whole record is written as a new snapshot and the older segments are
deleted.

Changes are coalesced: the first change after a quiet second is written at once, further ones
at most once a second (FLUSH_INTERVAL), all in one segment, one create per Secret. So a burst of
Works costs a few writes, not one per Work.

The guarantee: a change reaches the member within FLUSH_INTERVAL plus one write of its
segment after `save` or `delete`, while the member accepts writes (a failed write is retried,
with backoff, keeping every change queued). These writes spend only spare tokens of the
member's QPS budget (--cluster-api-qps): while applies use all of it (a burst at the limit),
the record waits for them, so it lags the applies by at most the interval plus the burst. A crash (SIGKILL, node loss) in that window loses the
changes queued in it, nothing written before: an agent that then starts while the control plane
is unreachable serves those Works as last recorded (a new Work not at all, a changed one at its
previous content, a deleted one still) until the control plane answers and the current Works
are read from it. `stop()` writes what is queued before the agent exits. A caller that needs a
change durable before it goes on (a rare fact that must survive any crash) passes `wait=True`:
the change is written at once and `save`/`delete` return only when it is on the member, raising
KubeError when it could not be written (it stays queued and is retried).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import gzip
import hashlib
import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent.karmada.manifest_status import applied_status
from agent.kube.backoff import Backoff
from agent.kube.client import KubeClient
from agent.kube.errors import AlreadyExistsError, KubeError, NotFoundError
from agent.kube.resources import NAMESPACES, SECRETS
from agent.kube.tasks import background
from agent.logs import get_logger
from agent.sources.record_packing import pack, unpack

log = get_logger(__name__)

JsonDict = dict[str, Any]

RECORD_LABEL = "karmada-agent.io/record"
RECORD_KIND = "work"
CLUSTER_LABEL = "karmada-agent.io/cluster"
SEGMENT_ANNOTATION = "karmada-agent.io/segment"
SEGMENT_KIND_ANNOTATION = "karmada-agent.io/segment-kind"
HASH_ANNOTATION = "karmada-agent.io/content-hash"
PART_ANNOTATION = "karmada-agent.io/part"
PARTS_ANNOTATION = "karmada-agent.io/parts"
SNAPSHOT = "snapshot"
DELTA = "delta"
SECRET_TYPE = "karmada-agent.io/work-record"
DATA_KEY = "records"
# A Secret's data may total 1 MiB; keep room for metadata.
PART_BYTES = 768 * 1024
# Changes are written at most this often (the first one after a quiet period at once).
FLUSH_INTERVAL = 1.0
# A new snapshot once the deltas since the last one weigh as much as it (at least this much),
# or once there are this many.
COMPACT_MIN_BYTES = 256 * 1024
MAX_DELTAS = 64
# Larger segments are compressed in a worker thread, off the event loop.
INLINE_ENCODE_BYTES = 256 * 1024
RETRY_INITIAL = 1.0
RETRY_MAX = 30.0
# Secret names: a short digest of the cluster keeps two clusters' records apart in one namespace.
_NAME_PREFIX = "work-records"
_VOLATILE = ("resourceVersion", "managedFields", "selfLink")


def recorded_content(work: JsonDict) -> JsonDict:
    """What the record keeps of a Work: everything but write bookkeeping."""
    meta = {k: v for k, v in (work.get("metadata") or {}).items() if k not in _VOLATILE}
    return {**{k: v for k, v in work.items() if k != "metadata"}, "metadata": meta}


def content_hash(work: JsonDict) -> bytes:
    """Changes with the Work's metadata and spec, not with its status (16 bytes of a SHA-256,
    kept for every recorded Work and only compared)."""
    content = recorded_content(work)
    content.pop("status", None)
    encoded = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).digest()[:16]


def applied_in_full(work: JsonDict) -> bool:
    """The Work's status says its last apply succeeded for every manifest (Applied=True)."""
    return applied_status(work) == "True"


@dataclass(frozen=True, slots=True)
class _Entry:
    """One recorded Work: its content hash, whether it was applied in full, and its JSON,
    packed (agent.sources.record_packing; kept for snapshots)."""

    hash: bytes
    in_full: bool
    packed: bytes

    @classmethod
    def of(cls, work: JsonDict, digest: bytes) -> _Entry:
        raw = json.dumps(recorded_content(work), separators=(",", ":")).encode()
        return cls(digest, applied_in_full(work), pack(raw))

    @property
    def raw(self) -> bytes:
        return unpack(self.packed)


def encode_segment(entries: Iterable[tuple[str, bytes | None]]) -> bytes:
    """The segment document for (name, raw JSON or None for a deletion), gzip-compressed."""
    body = b",".join(
        json.dumps(name).encode() + b":" + (b"null" if raw is None else raw)
        for name, raw in entries
    )
    return gzip.compress(b'{"works":{' + body + b"}}", compresslevel=6, mtime=0)


def decode_segment(data: bytes) -> dict[str, JsonDict | None]:
    document = json.loads(gzip.decompress(data))
    works = document.get("works") if isinstance(document, dict) else None
    if not isinstance(works, dict):
        raise ValueError("the segment holds no works")
    return {
        str(name): work for name, work in works.items() if work is None or isinstance(work, dict)
    }


async def _encoded(entries: list[tuple[str, bytes | None]]) -> bytes:
    """encode_segment, in a worker thread when large (zlib releases the GIL)."""
    if sum(len(raw or b"") for _, raw in entries) < INLINE_ENCODE_BYTES:
        return encode_segment(entries)
    return await asyncio.to_thread(encode_segment, entries)


def split_parts(data: bytes) -> list[bytes]:
    return [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)] or [b""]


@dataclass
class _Segment:
    """A segment found on the member: its parts' Secret names and its size."""

    seq: int
    kind: str
    parts: dict[int, JsonDict] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [str((s.get("metadata") or {}).get("name")) for s in self.parts.values()]

    def _annotations(self, part: int) -> dict[str, str]:
        return dict(((self.parts[part].get("metadata") or {}).get("annotations")) or {})

    def complete(self) -> bool:
        if 0 not in self.parts:
            return False
        first = self._annotations(0)
        try:
            count = int(first.get(PARTS_ANNOTATION, "0"))
        except ValueError:
            return False
        digest = first.get(HASH_ANNOTATION)
        return sorted(self.parts) == list(range(count)) and all(
            self._annotations(i).get(HASH_ANNOTATION) == digest for i in range(count)
        )

    def data(self) -> bytes:
        return b"".join(
            base64.b64decode(((self.parts[i].get("data") or {}).get(DATA_KEY)) or "")
            for i in sorted(self.parts)
        )


@dataclass
class _Stored:
    """A segment of the current log (the snapshot or a delta after it) as written."""

    seq: int
    kind: str
    names: list[str]
    size: int


class WorkRecords:
    """The records of one cluster's Works in one member namespace."""

    name = "work-records"

    def __init__(
        self,
        member: KubeClient,
        namespace: str,
        cluster: str,
        *,
        flush_interval: float = FLUSH_INTERVAL,
        max_deltas: int = MAX_DELTAS,
    ) -> None:
        self.member = member
        # Coalesced writes take only the member budget's spare tokens: applies go first.
        self._background = KubeClient(member.transport.background())
        self.namespace = namespace
        self.cluster = cluster
        self.flush_interval = flush_interval
        self.max_deltas = max_deltas
        self._prefix = f"{_NAME_PREFIX}-{hashlib.sha256(cluster.encode()).hexdigest()[:8]}"
        # What the member holds, and what is queued for it (None: the record is to be deleted).
        self._stored: dict[str, _Entry] | None = None
        self._queued: dict[str, _Entry | None] = {}
        # The current log on the member: its snapshot (if any) first, then the deltas.
        self._log: list[_Stored] = []
        # Segments no reader needs any more (older than the snapshot, or incomplete).
        self._garbage: list[str] = []
        self._next_seq = 1
        self._namespace_checked = False
        self._write_lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None
        # Set by a change (and, for a caller that waits, urgent: no coalescing delay).
        self._wake = asyncio.Event()
        self._urgent = asyncio.Event()
        self._last_write = float("-inf")
        # The outcome of the next segment write, for callers that wait for it.
        self._next_write: asyncio.Future[None] | None = None
        self._stopped = False

    @property
    def selector(self) -> str:
        return f"{RECORD_LABEL}={RECORD_KIND},{CLUSTER_LABEL}={self.cluster}"

    @property
    def pending(self) -> int:
        """Changes queued and not yet written."""
        return len(self._queued)

    # --- Runnable: started before the controllers, stopped after them ---------------------------

    async def start(self) -> None:
        self._stopped = False
        if self._queued:
            # Left by an earlier term whose last write failed.
            await self._changed(wait=False)

    async def stop(self) -> None:
        """Write what is queued (the manager bounds how long), then stop the writer."""
        try:
            if self._queued:
                with contextlib.suppress(KubeError):
                    await self.flush()
        finally:
            self._stopped = True
            task, self._flusher = self._flusher, None
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # --- reading -------------------------------------------------------------------------------

    async def load(self) -> list[JsonDict]:
        """Every recorded Work (after writing what is queued); unreadable segments are logged
        and left out."""
        if self._queued:
            with contextlib.suppress(KubeError):
                await self.flush()
        async with self._write_lock:
            listed = await self.member.list(
                SECRETS, namespace=self.namespace, label_selector=self.selector
            )
            works = self._read_log(listed.get("items") or [])
        return works

    def _read_log(self, secrets: list[JsonDict]) -> list[JsonDict]:
        segments: dict[int, _Segment] = {}
        for secret in secrets:
            annotations = (secret.get("metadata") or {}).get("annotations") or {}
            try:
                seq = int(annotations[SEGMENT_ANNOTATION])
                part = int(annotations.get(PART_ANNOTATION, "0"))
            except (KeyError, ValueError):
                log.info(
                    "a Secret with the Work record label that is no record segment; ignored",
                    secret=(secret.get("metadata") or {}).get("name"),
                )
                continue
            kind = str(annotations.get(SEGMENT_KIND_ANNOTATION, DELTA))
            segments.setdefault(seq, _Segment(seq, kind)).parts[part] = secret
        self._next_seq = max(segments, default=0) + 1
        complete = [s for s in sorted(segments.values(), key=lambda s: s.seq) if s.complete()]
        snapshots = [s.seq for s in complete if s.kind == SNAPSHOT]
        base = snapshots[-1] if snapshots else 0
        self._garbage = [
            name for s in segments.values() if s.seq < base or not s.complete() for name in s.names
        ]
        stored: dict[str, _Entry] = {}
        works: dict[str, JsonDict] = {}
        self._log = []
        for segment in complete:
            if segment.seq < base:
                continue
            data = segment.data()
            try:
                entries = decode_segment(data)
            except (ValueError, OSError, EOFError, zlib.error, binascii.Error) as exc:
                log.warning(
                    "Work record segment unreadable; left out", segment=segment.seq, error=str(exc)
                )
                continue
            if segment.kind == SNAPSHOT:
                stored, works = {}, {}
            self._log.append(_Stored(segment.seq, segment.kind, segment.names, len(data)))
            for name, work in entries.items():
                if work is None:
                    stored.pop(name, None)
                    works.pop(name, None)
                else:
                    stored[name] = _Entry.of(work, content_hash(work))
                    works[name] = work
        self._stored = stored
        return [works[name] for name in sorted(works)]

    async def _ensure_loaded(self) -> dict[str, _Entry]:
        if self._stored is None:
            await self.load()
        assert self._stored is not None
        return self._stored

    # --- writing -------------------------------------------------------------------------------

    async def save(self, work: JsonDict, *, wait: bool = False) -> bool:
        """Record the Work as applied; False when the record was up to date already. Written
        within FLUSH_INTERVAL (see the module's guarantee), or before returning with `wait`."""
        name = str((work.get("metadata") or {}).get("name"))
        stored = await self._ensure_loaded()
        digest = content_hash(work)
        current = self._queued[name] if name in self._queued else stored.get(name)
        if (
            current is not None
            and current.hash == digest
            and current.in_full == applied_in_full(work)
        ):
            if wait:
                await self._written(name)
            return False
        self._queued[name] = _Entry.of(work, digest)
        await self._changed(wait)
        return True

    def applied_as_recorded(self, work: JsonDict) -> bool:
        """The record (written or queued) holds this very Work, metadata and spec, as applied
        in full: its manifests are those the member objects were last applied from. False
        while the record is not loaded."""
        if self._stored is None:
            return False
        name = str((work.get("metadata") or {}).get("name"))
        current = self._queued[name] if name in self._queued else self._stored.get(name)
        return current is not None and current.in_full and current.hash == content_hash(work)

    async def delete(self, work_name: str, *, wait: bool = False) -> None:
        """Drop the Work's record (within FLUSH_INTERVAL, or before returning with `wait`)."""
        stored = await self._ensure_loaded()
        if work_name not in stored:
            self._queued.pop(work_name, None)  # never written: nothing to delete
            return
        if work_name in self._queued and self._queued[work_name] is None:
            return
        self._queued[work_name] = None
        await self._changed(wait)

    async def flush(self) -> None:
        """Write what is queued now; raises KubeError when it could not be written."""
        if self._queued:
            await self._changed(wait=True)

    async def _written(self, name: str) -> None:
        """Wait until the queued change of `name`, if any, is on the member."""
        if name in self._queued:
            await self._changed(wait=True)

    async def _changed(self, wait: bool) -> None:
        if self._stopped:
            # After stop (an agent shutting down, leadership lost): written by the next holder.
            return
        self._ensure_flusher()
        if self._next_write is None:
            self._next_write = asyncio.get_running_loop().create_future()
        outcome = self._next_write
        if wait:
            self._urgent.set()
        self._wake.set()
        if wait:
            await asyncio.shield(outcome)

    def _ensure_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = background(self._flush_loop(), name="work-records")

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = Backoff(initial=RETRY_INITIAL, cap=RETRY_MAX, jitter=0.0)
        while True:
            await self._wake.wait()
            # Coalesce: at most one write per interval, unless a caller waits for it.
            delay = self._last_write + self.flush_interval - loop.time()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._urgent.wait(), delay)
            # A caller waiting for the write: it may not yield to the other requests.
            client = self.member if self._urgent.is_set() else self._background
            self._wake.clear()
            self._urgent.clear()
            outcome, self._next_write = self._next_write, None
            try:
                await self._write_queued(client)
            except Exception as exc:
                retry = backoff.next()
                if isinstance(exc, KubeError):
                    log.warning(
                        "Work record not written; retrying",
                        changes=len(self._queued),
                        error=str(exc),
                        retry_in=retry,
                    )
                    error = exc
                else:
                    log.exception("Work record not written; retrying", retry_in=retry)
                    error = KubeError(f"Work record not written: {exc}")
                _settle(outcome, error)
                await asyncio.sleep(retry)  # backoff before writing again
                self._wake.set()
                continue
            backoff.reset()
            _settle(outcome, None)
            await self._compact_if_due()

    async def _write_queued(self, client: KubeClient) -> None:
        async with self._write_lock:
            stored = await self._ensure_loaded_locked()
            batch, self._queued = self._queued, {}
            if not batch:
                return
            self._last_write = asyncio.get_running_loop().time()
            try:
                data = await _encoded(
                    [(name, None if e is None else e.raw) for name, e in sorted(batch.items())]
                )
                await self._ensure_namespace()
                self._log.append(await self._write_segment(DELTA, data, client))
            except BaseException:
                # Kept for the next write; changes queued meanwhile are newer.
                self._queued = {**batch, **self._queued}
                raise
            for name, entry in batch.items():
                if entry is None:
                    stored.pop(name, None)
                else:
                    stored[name] = entry

    async def _ensure_loaded_locked(self) -> dict[str, _Entry]:
        if self._stored is None:
            listed = await self.member.list(
                SECRETS, namespace=self.namespace, label_selector=self.selector
            )
            self._read_log(listed.get("items") or [])
        assert self._stored is not None
        return self._stored

    async def _compact_if_due(self) -> None:
        """A snapshot once the deltas outweigh it (an empty record: the segments deleted); a
        failure is logged and compaction tried again after the next write."""
        try:
            async with self._write_lock:
                await self._compact(await self._ensure_loaded_locked())
        except KubeError as exc:
            log.info("Work record not compacted; tried again later", error=str(exc))

    async def _compact(self, stored: dict[str, _Entry]) -> None:
        deltas = [s for s in self._log if s.kind == DELTA]
        snapshot_size = sum(s.size for s in self._log if s.kind == SNAPSHOT)
        delta_size = sum(s.size for s in deltas)
        due = len(deltas) >= self.max_deltas or delta_size >= max(snapshot_size, COMPACT_MIN_BYTES)
        if not due and stored:
            return  # (an empty record is compacted at once: that only deletes)
        obsolete = [name for s in self._log for name in s.names] + self._garbage
        if stored:
            data = await _encoded([(name, e.raw) for name, e in sorted(stored.items())])
            self._log = [await self._write_segment(SNAPSHOT, data, self._background)]
        else:
            # Nothing recorded: an empty log says so. Deleted oldest first, a crash midway
            # leaves only deltas whose later entries (deletions) win.
            self._log = []
        self._garbage = []
        for name in obsolete:
            await self._delete_secret(name)

    async def _write_segment(self, kind: str, data: bytes, client: KubeClient) -> _Stored:
        """Create the segment's Secrets, last part first; a number already taken (another
        writer) moves on to the next."""
        parts = split_parts(data)
        digest = hashlib.sha256(data).hexdigest()[:32]
        while True:
            seq = self._next_seq
            self._next_seq += 1
            names = [self._secret_name(seq, i) for i in range(len(parts))]
            try:
                for index in reversed(range(len(parts))):
                    await client.create(
                        SECRETS,
                        self._secret(names[index], seq, kind, index, parts, digest),
                        namespace=self.namespace,
                    )
            except AlreadyExistsError:
                log.warning("Work record segment number taken; another writer?", segment=seq)
                self._garbage.extend(names[index + 1 :])
                continue
            except BaseException:
                self._garbage.extend(names)
                raise
            return _Stored(seq, kind, names, len(data))

    def _secret_name(self, seq: int, part: int) -> str:
        return f"{self._prefix}-{seq:010d}" + (f"-p{part}" if part else "")

    def _secret(
        self, name: str, seq: int, kind: str, index: int, parts: list[bytes], digest: str
    ) -> JsonDict:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": SECRET_TYPE,
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {RECORD_LABEL: RECORD_KIND, CLUSTER_LABEL: self.cluster},
                "annotations": {
                    SEGMENT_ANNOTATION: str(seq),
                    SEGMENT_KIND_ANNOTATION: kind,
                    HASH_ANNOTATION: digest,
                    PART_ANNOTATION: str(index),
                    PARTS_ANNOTATION: str(len(parts)),
                },
            },
            "data": {DATA_KEY: base64.b64encode(parts[index]).decode()},
        }

    async def _delete_secret(self, name: str) -> None:
        try:
            await self._background.delete(SECRETS, name, namespace=self.namespace)
        except NotFoundError:
            pass
        except KubeError as exc:
            # Left for the next compaction; a reader ignores it meanwhile.
            log.info("old Work record segment not deleted", secret=name, error=str(exc))
            self._garbage.append(name)

    async def _ensure_namespace(self) -> None:
        if self._namespace_checked:
            return
        try:
            await self.member.get(NAMESPACES, self.namespace)
        except NotFoundError:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
            with contextlib.suppress(AlreadyExistsError):
                await self.member.create(NAMESPACES, body)
        self._namespace_checked = True


def _settle(outcome: asyncio.Future[None] | None, error: KubeError | None) -> None:
    """Tell the callers waiting for a write how it went."""
    if outcome is None or outcome.done():
        return
    if error is None:
        outcome.set_result(None)
    else:
        outcome.set_exception(error)
        outcome.exception()  # retrieved: the waiters may have gone


async def save_quietly(records: WorkRecords, work: JsonDict) -> None:
    """Record the Work; a failure is logged (the next apply tries again), never raised."""
    try:
        await records.save(work)
    except KubeError as exc:
        log.warning("Work record not written", error=str(exc))
