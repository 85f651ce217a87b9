"""--controllers (agent/options/controller_selection.py)."""

from __future__ import annotations

import pytest

from agent.options.controller_selection import CONTROLLERS, ControllerSelection
from tests.agent.options.support import parse


@pytest.mark.parametrize(
    ("entries", "enabled"),
    [
        (("*",), set(CONTROLLERS) - {"endpointsliceCollect"}),
        (("*", "-certRotation"), set(CONTROLLERS) - {"endpointsliceCollect", "certRotation"}),
        (("*", "certRotation"), set(CONTROLLERS) - {"endpointsliceCollect"}),
        (("execution",), {"execution"}),
        (("execution", "workStatus"), {"execution", "workStatus"}),
        (("-execution", "*"), set(CONTROLLERS) - {"endpointsliceCollect", "execution"}),
        (
            ("-execution", "execution", "*"),
            set(CONTROLLERS) - {"endpointsliceCollect", "execution"},
        ),
        ((), set()),
    ],
)
def test_controller_selection(entries: tuple[str, ...], enabled: set[str]) -> None:
    options = parse("--controllers=" + ",".join(entries))
    assert options.enabled_controllers() == enabled


def test_cert_rotation_is_on_by_default_unlike_upstream() -> None:
    assert ControllerSelection(("*",)).is_enabled("certRotation") is True
    assert parse().cert_rotation_requested is False
    assert parse("--controllers=*,certRotation").cert_rotation_requested is True
    assert "certRotation" not in parse("--controllers=*,-certRotation").enabled_controllers()
