"""kubectl creates one object of every built-in kind the emulator serves, and the emulator
stores each as it stores the same object sent as a protobuf body (the form client-go's typed
clients send)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from emulator.emulator import Emulator
from emulator.protobuf import PROTOBUF, message_kind
from emulator.registry import ResourceType

from .kubectl import Kubectl, version_params
from .pbencode import encode_object
from .samples import SAMPLES, sample
from .test_kubectl import new_ns

module_loop = pytest.mark.asyncio(loop_scope="module")
JSON = dict[str, Any]


def _objects(emu: Emulator, ns: str) -> list[tuple[ResourceType, JSON]]:
    """Every served kind's sample: namespaced ones in `ns`, cluster-scoped ones named after it."""
    out = []
    for api_version, kind in sorted(SAMPLES):
        rt = emu.api.registry.by_api_version_kind(api_version, kind)
        if rt is None:
            continue
        out.append((rt, sample(api_version, kind, "sample" if rt.namespaced else f"{ns}-s", ns)))
    return out


def _url(rt: ResourceType, obj: JSON) -> str:
    prefix = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    if rt.namespaced:
        return f"{prefix}/namespaces/{obj['metadata']['namespace']}/{rt.resource}"
    return f"{prefix}/{rt.resource}"


def _normalized(obj: JSON, rename: tuple[str, str] = ("", "")) -> JSON:
    out = copy.deepcopy(obj)
    for key in ("uid", "creationTimestamp", "resourceVersion", "managedFields"):
        out["metadata"].pop(key, None)
    if rename[0]:
        out = json.loads(json.dumps(out).replace(*rename))
    return out


def _documents(text: str) -> list[JSON]:
    """kubectl -o json prints one JSON document per object, one after another."""
    decoder, docs, pos = json.JSONDecoder(), [], 0
    while pos < len(text.rstrip()):
        doc, end = decoder.raw_decode(text, pos)
        docs.append(doc)
        pos = end + len(text[end:]) - len(text[end:].lstrip())
    return docs


@module_loop
@pytest.mark.parametrize("version", version_params())
async def test_kubectl_creates_every_builtin_kind(
    version: str, emu: Emulator, admin_kubeconfig: Path, ns: str, tmp_path: Path
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    objects = _objects(emu, ns)
    manifest = tmp_path / "all.json"
    items = [obj for _, obj in objects]
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    # What the server answered to each create (controllers may change objects later).
    created = await k("create", "-f", str(manifest), "-o", "json")
    assert (created.rc, created.err) == (0, "")
    by_kubectl = {(o["kind"], o["metadata"]["name"]): o for o in _documents(created.out)}
    assert len(by_kubectl) == len(objects)

    # The same objects, in a second namespace, as protobuf bodies.
    pb_ns = f"{ns}-pb"
    await new_ns(k, pb_ns)
    async with emu.client() as client:
        for rt, obj in _objects(emu, pb_ns):
            message = message_kind(rt.api_version, rt.kind)
            assert message is not None
            body = encode_object(obj, message)
            resp = await client.post(
                _url(rt, obj), content=body, headers={"content-type": PROTOBUF}
            )
            assert resp.status_code == 201, (rt.kind, resp.text)
            name = obj["metadata"]["name"].replace(pb_ns, ns)
            stored = by_kubectl[(rt.kind, name)]
            assert _normalized(resp.json(), (pb_ns, ns)) == _normalized(stored), rt.kind
