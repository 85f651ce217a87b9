"""The chaos scenario of bench/chaos.py at a small size: 20 Works through injected 500s and 429s
on both sides, watch streams cut every 2 s, a forced 410 Gone, the agent killed with SIGKILL
mid-burst and restarted while the control plane is down (5 s), a member outage (3 s) and a slow
link (300 ms RTT, 256 kbit/s). Every pass criterion of the benchmark must hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.chaos import Scale, failures, run


@pytest.mark.timeout(120)
async def test_chaos_scenario_at_a_small_size(tmp_path: Path) -> None:
    result = await run(Scale.ci(), tmp_path)
    print(json.dumps(result, indent=2))
    # The kill came mid-burst: the half created before it applied, none of the rest.
    assert result["works_applied_at_kill"] == result["works"] // 2
    assert failures(result) == []
