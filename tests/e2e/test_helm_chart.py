"""Installed with Karmada's own Helm chart (charts/karmada, `installMode: agent`) and our image:
rendered by a real helm, applied to the emulated member, and our agent started from exactly the
Deployment it rendered (its command with `$(POD_IP)` expanded from the Pod's IP, the mounted
`<release>-kubeconfig` Secret, the ServiceAccount token; tests/e2e/pod_sandbox.py). It goes
Ready, applies a Work, serves metrics on the Pod's IP and rotates its certificate into the
chart's Secret layout (key `kubeconfig` of `<release>-kubeconfig`, found through its own Pod's
volume).

Needs: helm (`make helm` / tools/install_helm.py, from the npm registry; called here), Karmada's
chart (KARMADA_CHART, else the upstream build's checkout beside KARMADA_UPSTREAM_BIN at
../src/karmada/charts/karmada), and a private mount namespace (root); skips with the reason
otherwise. The chart's bitnami `common` dependency is a test-only stand-in
(tests/e2e/helm/common). The values carry a client certificate for the agent's identity,
issued for twelve minutes and ten of them gone, so the first check at start rotates it.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent.certificates import certificate_lifetime, subject_of
from agent.kube.client import KubeClient
from agent.kube.resources import DEPLOYMENTS, NAMESPACES, SECRETS
from emulator.emulator import run_emulator
from emulator.upstream import upstream_dir

from .pod_sandbox import joins_and_applies, sandbox_missing_reason, start_pod_container
from .support import DEPLOY, REPO, client_for, eventually, kubectl

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
RELEASE = "karmada-agent"
NAMESPACE = "karmada-system"
REGISTRY, REPOSITORY, TAG = "ghcr.io", "karmada-pull-agent/karmada-agent", "0.1.0"
STAND_IN = Path(__file__).resolve().parent / "helm" / "common"
SANDBOX = sandbox_missing_reason()

pytestmark = [
    pytest.mark.skipif(SANDBOX is not None, reason=SANDBOX or ""),
    pytest.mark.timeout(300),
]
JSON = dict[str, Any]


def karmada_chart() -> Path | None:
    given = os.environ.get("KARMADA_CHART")
    if given:
        return Path(given)
    bin_dir = upstream_dir()
    return None if bin_dir is None else bin_dir.parent / "src" / "karmada" / "charts" / "karmada"


@pytest.fixture(scope="module")
def helm() -> Path:
    """helm, installed by the project's own installer (npm registry)."""
    done = subprocess.run(
        [sys.executable, "-m", "tools.install_helm"],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"no helm: {done.stderr.strip()}")
    return Path(done.stdout.strip())


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Karmada's chart with the stand-in `common` in its charts/."""
    source = karmada_chart()
    if source is None:
        pytest.skip("no Karmada chart: set KARMADA_CHART or KARMADA_UPSTREAM_BIN")
    if not (source / "Chart.yaml").is_file():
        pytest.skip(f"no Karmada chart at {source} (the upstream build checks it out)")
    copy = tmp_path_factory.mktemp("chart") / "karmada"
    shutil.copytree(source, copy)
    shutil.rmtree(copy / "charts", ignore_errors=True)
    shutil.copytree(STAND_IN, copy / "charts" / "common")
    return copy


def render(helm: Path, chart: Path, values: JSON, workdir: Path) -> list[JSON]:
    values_file = workdir / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    done = subprocess.run(
        [str(helm), "template", RELEASE, str(chart), "--namespace", NAMESPACE,
         "--values", str(values_file)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"helm template failed: {done.stderr}"
    (workdir / "rendered.yaml").write_text(done.stdout)
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


async def ensure_namespace(client: KubeClient, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    try:
        await client.create(NAMESPACES, body)
    except Exception:
        await client.get(NAMESPACES, name)


def kubeconfig_certificate(secret: JSON) -> bytes:
    document = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    context = next(c for c in document["contexts"] if c["name"] == document["current-context"])
    user = next(u for u in document["users"] if u["name"] == context["context"]["user"])
    return base64.b64decode(user["user"]["client-certificate-data"])


async def test_chart_install_mode_agent_with_our_image(
    chart: Path, helm: Path, tmp_path: Path
) -> None:
    # (The chart first: without it the test skips before helm is fetched.)
    async with (
        run_emulator("karmada", name="karmada") as cp,
        run_emulator("member", name=CLUSTER) as member_emulator,
    ):
        cp_kc = cp.write_kubeconfig(tmp_path / "karmada.kubeconfig")
        member_kc = member_emulator.write_kubeconfig(tmp_path / "member.kubeconfig")
        karmada = await client_for(cp_kc)
        member = await client_for(member_kc)
        try:
            # The agent's identity on the control plane: our RBAC for it (deploy/control-plane).
            for namespace in ("karmada-cluster", ES):
                await ensure_namespace(karmada, namespace)
            rendered_rbac = await kubectl(None, "kustomize", str(DEPLOY / "control-plane"))
            await kubectl(cp_kc, "apply", "--server-side", "-f", "-", stdin=rendered_rbac)
            now = datetime.now(UTC)
            cert, key = cp.ca.issue(
                f"system:karmada:agent:{CLUSTER}", ["system:karmada:agents"],
                lifetime=timedelta(minutes=12), now=now - timedelta(minutes=10),
            )  # fmt: skip
            values = {
                "installMode": "agent",
                "agent": {
                    "clusterName": CLUSTER,
                    "clusterEndpoint": member_emulator.url,
                    "image": {"registry": REGISTRY, "repository": REPOSITORY, "tag": TAG},
                    "kubeconfig": {
                        "caCrt": cp.ca_pem.decode(),
                        "crt": cert.decode(),
                        "key": key.decode(),
                        "server": cp.url,
                    },
                },
            }
            objects = render(helm, chart, values, tmp_path)
            deployment = next(o for o in objects if o["kind"] == "Deployment")
            container = deployment["spec"]["template"]["spec"]["containers"][0]
            assert container["image"] == f"{REGISTRY}/{REPOSITORY}:{TAG}"
            assert "--metrics-bind-address=$(POD_IP):8080" in container["command"]
            secret = next(o for o in objects if o["kind"] == "Secret")
            assert secret["metadata"]["name"] == f"{RELEASE}-kubeconfig"
            assert set(secret["stringData"]) == {"kubeconfig"}

            await ensure_namespace(member, NAMESPACE)
            await kubectl(
                member_kc, "apply", "-f", str(tmp_path / "rendered.yaml"), "-n", NAMESPACE
            )
            stored = await member.get(SECRETS, f"{RELEASE}-kubeconfig", namespace=NAMESPACE)
            assert "stringData" not in stored
            assert kubeconfig_certificate(stored) == cert

            agent = await start_pod_container(
                member_emulator, member_kc, member, NAMESPACE, RELEASE, tmp_path / "pod"
            )
            try:
                await _ready_applies_serves_and_rotates(agent, karmada, member, cert)
            finally:
                code = await agent.stop()
                assert code == 0, f"the agent exited {code}:\n{agent.log()}"
        finally:
            await karmada.close()
            await member.close()


async def _ready_applies_serves_and_rotates(
    agent: Any, karmada: KubeClient, member: KubeClient, installed: bytes
) -> None:
    pod_ip = agent.env["POD_IP"]
    assert pod_ip.startswith("127.")
    assert f"--metrics-bind-address={pod_ip}:8080" in agent.argv
    assert f"--health-probe-bind-address={pod_ip}:10357" in agent.argv

    await joins_and_applies(agent, karmada, member, CLUSTER, "from-chart", "from-chart")

    # The listeners on the Pod's IP, where the chart's livenessProbe and a scrape look.
    async with httpx.AsyncClient(timeout=5) as http:
        health = await http.get(f"http://{pod_ip}:10357/healthz")
        assert health.status_code == 200
        metrics = await http.get(f"http://{pod_ip}:8080/metrics")
        assert metrics.status_code == 200
        assert f'cluster_ready_state{{member_cluster="{CLUSTER}"}} 1.0' in metrics.text

    # Rotated into the chart's layout: <release>-kubeconfig, key kubeconfig, nothing else.
    async def rotated() -> bytes | None:
        secret = await member.get(SECRETS, f"{RELEASE}-kubeconfig", namespace=NAMESPACE)
        assert set(secret["data"]) == {"kubeconfig"}
        cert = kubeconfig_certificate(secret)
        return cert if cert != installed else None

    new_cert = await eventually(rotated, timeout=60, what="the rotated certificate in the Secret")
    assert certificate_lifetime(new_cert).not_after > certificate_lifetime(installed).not_after
    assert subject_of(new_cert) == subject_of(installed)
    # The Deployment is as rendered: rotation writes the Secret, never the Deployment.
    live = await member.get(DEPLOYMENTS, RELEASE, namespace=NAMESPACE)
    assert live["spec"]["template"]["spec"]["containers"][0]["command"][:3] == [
        "/bin/karmada-agent",
        "--karmada-kubeconfig=/etc/kubeconfig/kubeconfig",
        f"--cluster-name={CLUSTER}",
    ]
