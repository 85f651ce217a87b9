"""`python -m emulator --service` (alias `--webhook-service`): where Services are reached."""

from __future__ import annotations

import pytest

from emulator.__main__ import parse_args


def test_command_line_maps_services_to_addresses(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(
        ["--kubeconfig-out", "k", "--webhook-service", "karmada-system/karmada-webhook=127.0.0.1:8443",
         "--service", "hooks/h=[::1]:9443"]
    )  # fmt: skip
    assert dict(args.service) == {
        "karmada-system/karmada-webhook": "127.0.0.1:8443",
        "hooks/h": "[::1]:9443",
    }
    with pytest.raises(SystemExit):
        parse_args(["--kubeconfig-out", "k", "--webhook-service", "karmada-webhook:8443"])
    assert "expected NAMESPACE/NAME=HOST:PORT" in capsys.readouterr().err
