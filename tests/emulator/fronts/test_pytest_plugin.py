"""The pytest fixtures that ship with the emulator work as their docstrings say."""

from __future__ import annotations

import asyncio
import stat
import subprocess
from pathlib import Path

from emulator.emulator import Emulator


async def test_member_fixture_kubeconfig_works_with_kubectl(
    member_emulator: Emulator, emulator_kubeconfig: Path
) -> None:
    mode = await asyncio.to_thread(lambda: emulator_kubeconfig.stat().st_mode)
    assert stat.S_IMODE(mode) == 0o600
    result = await asyncio.to_thread(
        subprocess.run,
        ["kubectl", "--kubeconfig", str(emulator_kubeconfig), "get", "nodes", "-o", "name"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.splitlines()[0].startswith("node/member1-node-")


async def test_karmada_fixture_serves_the_karmada_apis(karmada_emulator: Emulator) -> None:
    async with karmada_emulator.client() as client:
        clusters = await client.get("/apis/cluster.karmada.io/v1alpha1/clusters")
        works_crd = await client.get(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/works.work.karmada.io"
        )
    assert clusters.status_code == 200
    assert clusters.json()["kind"] == "ClusterList"
    assert works_crd.status_code == 200
