"""kubectl on the wire, as it talks to kube-apiserver: HTTP/2 by ALPN, every request of one
command on one connection, and large lists sent gzip-compressed (Go asks for gzip)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulator.emulator import Emulator

from .kubectl import Kubectl, version_params
from .test_kubectl import new_ns

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
versions = pytest.mark.parametrize("version", version_params())


@versions
async def test_kubectl_speaks_http2_and_reads_gzip_lists(
    version: str, emu: Emulator, admin_kubeconfig: Path, ns: str
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    blob = "x" * (60 * 1024)
    for i in range(3):
        manifest = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"big-{i}", "namespace": ns},
            "data": {"blob": blob},
        }
        assert (await k("create", "-f", "-", stdin=json.dumps(manifest))).rc == 0
    log = emu.server.connection_log
    before = {r.id for r in log.records}

    got = await k("get", "configmaps", "-n", ns, "-o", "json")

    assert got.rc == 0, got.err
    items = json.loads(got.out)["items"]
    assert sorted(
        i["metadata"]["name"] for i in items if i["metadata"]["name"].startswith("big-")
    ) == [
        "big-0",
        "big-1",
        "big-2",
    ]
    assert all(i["data"]["blob"] == blob for i in items if "blob" in i.get("data", {}))
    mine = [r for r in log.records if r.id not in before]
    # Discovery (unless cached) and the list: one HTTP/2 connection; the list came gzipped.
    assert [r.protocol for r in mine] == ["h2"]
    assert mine[0].gzipped >= 1
