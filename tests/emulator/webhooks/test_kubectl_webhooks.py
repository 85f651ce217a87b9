"""The real kubectl against an emulator with admission webhooks: configurations applied with
kubectl, a mutating webhook's patch in what kubectl shows, a refusal as kubectl prints it."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.emulator import Emulator
from tests.emulator.conformance.kubectl import Kubectl, version_params

from .server import WebhookServer, json_patch

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def kubeconfig(emu: Emulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emu.write_kubeconfig(tmp_path_factory.mktemp("kc") / "admin.kubeconfig")


def configuration(kind: str, name: str, server: WebhookServer, path: str, ops: str) -> str:
    return f"""apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata:
  name: {name}
webhooks:
- name: {name}.example.com
  clientConfig:
    url: {server.url(path)}
    caBundle: {server.ca_bundle}
  rules:
  - operations: [{ops}]
    apiGroups: [""]
    apiVersions: [v1]
    resources: [configmaps]
  admissionReviewVersions: [v1]
  sideEffects: None
  namespaceSelector:
    matchLabels: {{webhooks: enabled}}
"""


@pytest.mark.parametrize("version", version_params())
async def test_kubectl_sees_mutations_and_refusals(
    version: str, kubeconfig: Path, server: WebhookServer
) -> None:
    k = Kubectl(version, kubeconfig)
    v = version.replace(".", "-")
    server.answer(
        "kubectl-label",
        lambda r: json_patch([{"op": "add", "path": "/metadata/labels", "value": {"seen": "yes"}}]),
    )
    server.answer(
        "kubectl-deny",
        lambda r: {"allowed": False, "status": {"code": 403, "reason": "Forbidden",
                                                "message": "no configmaps named deny-me"}}
        if r["name"] == "deny-me" else {"allowed": True},
    )  # fmt: skip
    mutating = configuration(
        "MutatingWebhookConfiguration", f"label-{v}", server, "kubectl-label", "CREATE"
    )
    validating = configuration(
        "ValidatingWebhookConfiguration", f"deny-{v}", server, "kubectl-deny", "CREATE"
    )
    out = await k.ok("apply", "-f", "-", stdin=mutating + "---\n" + validating)
    assert out.splitlines() == [
        f"mutatingwebhookconfiguration.admissionregistration.k8s.io/label-{v} created",
        f"validatingwebhookconfiguration.admissionregistration.k8s.io/deny-{v} created",
    ]
    try:
        for kind, name in (("mutating", f"label-{v}"), ("validating", f"deny-{v}")):
            table = await k.ok("get", f"{kind}webhookconfigurations", name)
            rows = [line.split() for line in table.splitlines()]
            assert [row[:2] for row in rows] == [["NAME", "WEBHOOKS"], [name, "1"]]
            assert rows[0][2] == "AGE"
        ns = f"kubectl-hooks-{v}"
        await k.ok("create", "namespace", ns)
        await k.ok("label", "namespace", ns, "webhooks=enabled")
        out = await k.ok("-n", ns, "create", "configmap", "plain")
        assert out.strip() == "configmap/plain created"
        labels = await k.ok(
            "-n", ns, "get", "configmap", "plain", "-o", "jsonpath={.metadata.labels}"
        )
        assert labels == '{"seen":"yes"}'

        result = await k("-n", ns, "create", "configmap", "deny-me")
        assert result.rc == 1
        assert result.err.strip() == (
            f'error: failed to create configmap: admission webhook "deny-{v}.example.com" '
            "denied the request: no configmaps named deny-me"
        )
        cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deny-me\n"
        result = await k("-n", ns, "create", "-f", "-", stdin=cm)
        assert result.rc == 1
        assert result.err.strip() == (
            'Error from server (Forbidden): error when creating "STDIN": admission webhook '
            f'"deny-{v}.example.com" denied the request: no configmaps named deny-me'
        )
    finally:
        await k.ok("delete", "-f", "-", stdin=mutating + "---\n" + validating)
