"""The durable record of what the agent applied, kept in the member cluster.

One record per Work: the Work as last applied (metadata, spec and the status it had, without
write bookkeeping), in Secrets of the agent's own namespace (--karmada-kubeconfig-namespace) on
the member, since manifests may carry Secrets. The JSON is gzip-compressed when it is larger
than COMPRESS_ABOVE, and split over several Secrets when even that exceeds PART_BYTES, so that
every Secret stays well under the API server's 1 MiB limit. A record is rewritten only when the
Work's content changed (a hash in an annotation), and deleted with the Work.

An agent that starts while the control plane is unreachable serves these Works
(agent.offline) until the link returns.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gzip
import hashlib
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from agent.kube.client import KubeClient
from agent.kube.errors import AlreadyExistsError, KubeError, NotFoundError
from agent.kube.resources import NAMESPACES, SECRETS
from agent.logs import get_logger

log = get_logger(__name__)

JsonDict = dict[str, Any]

RECORD_LABEL = "karmada-agent.io/record"
RECORD_KIND = "work"
CLUSTER_LABEL = "karmada-agent.io/cluster"
WORK_ANNOTATION = "karmada-agent.io/work"
HASH_ANNOTATION = "karmada-agent.io/content-hash"
PART_ANNOTATION = "karmada-agent.io/part"
PARTS_ANNOTATION = "karmada-agent.io/parts"
ENCODING_ANNOTATION = "karmada-agent.io/encoding"
SECRET_TYPE = "karmada-agent.io/work-record"
DATA_KEY = "work"
FIELD_MANAGER = "karmada-agent"
COMPRESS_ABOVE = 64 * 1024
# A Secret's data may total 1 MiB; keep room for metadata.
PART_BYTES = 768 * 1024
MAX_NAME = 253
_VOLATILE = ("resourceVersion", "managedFields", "selfLink")


def recorded_content(work: JsonDict) -> JsonDict:
    """What the record keeps of a Work: everything but write bookkeeping."""
    meta = {k: v for k, v in (work.get("metadata") or {}).items() if k not in _VOLATILE}
    return {**{k: v for k, v in work.items() if k != "metadata"}, "metadata": meta}


def content_hash(work: JsonDict) -> str:
    """Changes with the Work's metadata and spec, not with its status."""
    content = recorded_content(work)
    content.pop("status", None)
    encoded = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:32]


@dataclass(frozen=True)
class Encoded:
    encoding: str  # "json" or "gzip"
    parts: list[bytes]


def encode(work: JsonDict) -> Encoded:
    raw = json.dumps(recorded_content(work), separators=(",", ":")).encode()
    encoding = "json"
    if len(raw) > COMPRESS_ABOVE:
        raw, encoding = gzip.compress(raw, mtime=0), "gzip"
    parts = [raw[i : i + PART_BYTES] for i in range(0, len(raw), PART_BYTES)] or [b""]
    return Encoded(encoding, parts)


def decode(encoding: str, parts: list[bytes]) -> JsonDict:
    raw = b"".join(parts)
    if encoding == "gzip":
        raw = gzip.decompress(raw)
    work = json.loads(raw)
    if not isinstance(work, dict):
        raise ValueError("the record is not a JSON object")
    return work


def record_name(work_name: str, part: int) -> str:
    base = f"work-record-{work_name}"
    suffix = f"-p{part}" if part else ""
    if len(base) + len(suffix) > MAX_NAME:
        base = f"work-record-{hashlib.sha256(work_name.encode()).hexdigest()[:40]}"
    return base + suffix


@dataclass
class _Known:
    hash: str
    parts: int


@dataclass
class WorkRecords:
    """The records of one cluster's Works in one member namespace."""

    member: KubeClient
    namespace: str
    cluster: str
    _known: dict[str, _Known] | None = field(default=None, init=False)
    _namespace_checked: bool = field(default=False, init=False)

    @property
    def selector(self) -> str:
        return f"{RECORD_LABEL}={RECORD_KIND},{CLUSTER_LABEL}={self.cluster}"

    async def load(self) -> list[JsonDict]:
        """Every complete record, as Works; incomplete or corrupt ones are logged and left out."""
        listed = await self.member.list(
            SECRETS, namespace=self.namespace, label_selector=self.selector
        )
        grouped: dict[str, dict[int, JsonDict]] = {}
        for secret in listed.get("items") or []:
            annotations = (secret.get("metadata") or {}).get("annotations") or {}
            name = annotations.get(WORK_ANNOTATION)
            try:
                part = int(annotations.get(PART_ANNOTATION, "0"))
            except ValueError:
                continue
            if isinstance(name, str) and name:
                grouped.setdefault(name, {})[part] = secret
        works: list[JsonDict] = []
        known: dict[str, _Known] = {}
        for name, parts in sorted(grouped.items()):
            work = self._assemble(name, parts)
            if work is not None:
                works.append(work)
                first = (parts[0].get("metadata") or {}).get("annotations") or {}
                known[name] = _Known(str(first.get(HASH_ANNOTATION)), len(parts))
        self._known = known
        return works

    def _assemble(self, name: str, parts: dict[int, JsonDict]) -> JsonDict | None:
        first = parts.get(0)
        annotations = ((first or {}).get("metadata") or {}).get("annotations") or {}
        try:
            count = int(annotations.get(PARTS_ANNOTATION, "0"))
            if first is None or sorted(parts) != list(range(count)):
                raise ValueError(f"parts {sorted(parts)} of {count}")
            digest = annotations.get(HASH_ANNOTATION)
            chunks = []
            for index in range(count):
                meta = (parts[index].get("metadata") or {}).get("annotations") or {}
                if meta.get(HASH_ANNOTATION) != digest:
                    raise ValueError("parts of different versions")
                data = (parts[index].get("data") or {}).get(DATA_KEY) or ""
                chunks.append(base64.b64decode(data))
            return decode(str(annotations.get(ENCODING_ANNOTATION)), chunks)
        except (ValueError, binascii.Error, OSError, zlib.error) as exc:
            log.warning("Work record unreadable; left out", work=name, error=str(exc))
            return None

    async def _ensure_known(self) -> dict[str, _Known]:
        if self._known is None:
            await self.load()
        assert self._known is not None
        return self._known

    async def save(self, work: JsonDict) -> bool:
        """Record the Work as applied; False when the record was up to date already."""
        name = str((work.get("metadata") or {}).get("name"))
        known = await self._ensure_known()
        digest = content_hash(work)
        previous = known.get(name)
        if previous is not None and previous.hash == digest:
            return False
        encoded = encode(work)
        await self._ensure_namespace()
        # Later parts first: a reader never finds a first part whose others are missing.
        for index in reversed(range(len(encoded.parts))):
            await self.member.apply(
                SECRETS,
                self._secret(name, index, encoded, digest),
                field_manager=FIELD_MANAGER,
                force=True,
                namespace=self.namespace,
            )
        for stale in range(len(encoded.parts), previous.parts if previous else 0):
            await self._delete(record_name(name, stale))
        known[name] = _Known(digest, len(encoded.parts))
        return True

    async def delete(self, work_name: str) -> None:
        known = await self._ensure_known()
        previous = known.pop(work_name, None)
        if previous is None:
            return
        for index in range(previous.parts):
            await self._delete(record_name(work_name, index))

    async def _delete(self, name: str) -> None:
        with contextlib.suppress(NotFoundError):
            await self.member.delete(SECRETS, name, namespace=self.namespace)

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

    def _secret(self, work_name: str, index: int, encoded: Encoded, digest: str) -> JsonDict:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": SECRET_TYPE,
            "metadata": {
                "name": record_name(work_name, index),
                "namespace": self.namespace,
                "labels": {RECORD_LABEL: RECORD_KIND, CLUSTER_LABEL: self.cluster},
                "annotations": {
                    WORK_ANNOTATION: work_name,
                    HASH_ANNOTATION: digest,
                    PART_ANNOTATION: str(index),
                    PARTS_ANNOTATION: str(len(encoded.parts)),
                    ENCODING_ANNOTATION: encoded.encoding,
                },
            },
            "data": {DATA_KEY: base64.b64encode(encoded.parts[index]).decode()},
        }


async def save_quietly(records: WorkRecords, work: JsonDict, wlog: Any) -> None:
    """Record the Work; a failure is logged (the next apply tries again), never raised."""
    try:
        await records.save(work)
    except KubeError as exc:
        wlog.warning("Work record not written", error=str(exc))
