"""What the tests of agent.options share: parsing a command line, asking the upstream binary."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agent.options import Options, OptionsError, parse_options


def parse(*argv: str) -> Options:
    return parse_options(["--cluster-name=member1", *argv])


def problems_of(*argv: str) -> tuple[str, ...]:
    with pytest.raises(OptionsError) as caught:
        parse_options(list(argv))
    return caught.value.problems


def upstream_help() -> str:
    binary = Path(os.environ.get("KARMADA_UPSTREAM_BIN", "")) / "karmada-agent"
    if not os.environ.get("KARMADA_UPSTREAM_BIN") or not binary.exists():
        pytest.skip("KARMADA_UPSTREAM_BIN is not set (or has no karmada-agent): cannot ask it")
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr
