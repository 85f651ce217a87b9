# The emulator's fixtures, as users enable them in their own conftest.py.
from __future__ import annotations

import pytest

pytest_plugins = ["emulator.pytest_plugin"]


@pytest.fixture(autouse=True)
def _kubectl_discovers_afresh(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kubectl keeps what discovery found for hours under ~/.kube/cache, by server address, and
    the tests' servers take whatever port is free: a port used again would hand a test another
    server's discovery, and kubectl would ask other requests than the test expects."""
    monkeypatch.setenv("KUBECACHEDIR", str(tmp_path_factory.mktemp("kubectl-cache")))
