"""A conformance test never passes by not running: in CI a missing kubectl is a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from .kubectl import Kubectl, needs_kubectl


def test_missing_kubectl_is_skipped_only_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert needs_kubectl("0.0").args[0] is True
    monkeypatch.setenv("CI", "true")
    assert needs_kubectl("0.0").args[0] is False


def test_running_a_missing_kubectl_fails(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"kubectl 0\.0 is not installed"):
        Kubectl("0.0", tmp_path / "kubeconfig")
