"""Issue 2's "Done when": `python -m emulator` standalone, driven by kubectl, SIGTERM -> 0."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from tests import polling

from .kubectl import NEWEST, Kubectl, needs_kubectl

MANIFESTS = """apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: shop-config, namespace: shop}
data: {greeting: hello}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers:
      - {name: web, image: "nginx:1.25", ports: [{containerPort: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: shop, namespace: shop}
spec:
  selector: {app: shop}
  ports: [{port: 80, targetPort: 80}]
"""


@needs_kubectl(NEWEST)
async def test_standalone_emulator_with_kubectl(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "k"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "emulator", "--profile", "member", "--port", "0",
        "--kubeconfig-out", str(kubeconfig),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:

        def written() -> bool:
            assert proc.returncode is None, "the emulator exited before writing its kubeconfig"
            return kubeconfig.exists()

        await polling.eventually(written, timeout=20, interval=0.05, what="kubeconfig written")
        k = Kubectl(NEWEST, kubeconfig)
        out = await k.ok("apply", "--server-side", "-f", "-", stdin=MANIFESTS)
        assert out.split("\n")[:4] == [
            "namespace/shop serverside-applied",
            "configmap/shop-config serverside-applied",
            "deployment.apps/shop serverside-applied",
            "service/shop serverside-applied",
        ]
        table = await k.ok("get", "deployments,services,configmaps", "-n", "shop")
        assert "deployment.apps/shop" in table
        assert "service/shop" in table
        assert "configmap/shop-config" in table
        async with k.stream("get", "configmaps", "-n", "shop", "--watch", "-o", "name") as w:
            await w.until(lambda line: line == "configmap/shop-config")
            await k.ok("label", "configmap", "shop-config", "-n", "shop", "seen=yes")
            await w.until(lambda line: line == "configmap/shop-config" and len(w.lines) > 1)
        assert (await k.ok("auth", "can-i", "delete", "deployments", "-n", "shop")).strip() == "yes"
        out = await k.ok("delete", "-n", "shop", "deployment/shop", "service/shop", "--wait=false")
        assert out.split("\n")[:2] == ['deployment.apps "shop" deleted', 'service "shop" deleted']
        left = await k.ok("get", "deployments,services", "-n", "shop", "-o", "name")
        assert left.strip() == ""
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 20)
    assert rc == 0
