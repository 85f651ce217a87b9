"""A control-plane outage is reported once: one warning when the control plane becomes
unreachable, one info when it is back, a counter metric; no traceback and no error per period."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from agent.app import EXIT_OK, Agent
from tests.agent.controllers.clusterenv import Pair, emulator_pair, wait_for

from .test_app import ready_cluster, start

UNREACHABLE = "Karmada control plane unreachable"
REACHABLE = "Karmada control plane reachable again"


async def _back(pair: Pair) -> bool:
    return not pair.karmada.faults.offline


async def _metrics(agent: Agent) -> str:
    assert agent.serving is not None
    assert agent.serving.metrics is not None
    async with httpx.AsyncClient() as http:
        return (await http.get(f"http://127.0.0.1:{agent.serving.metrics.port}/metrics")).text


async def test_outage_logs_one_warning_one_info_and_counts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    period = timedelta(seconds=0.5)
    async with emulator_pair(tmp_path) as pair:
        options = pair.options(
            controllers=("*",),
            cluster_status_update_frequency=period,
            cluster_lease_duration=timedelta(seconds=2),
        )
        agent, task = start(options)
        await wait_for(lambda: ready_cluster(pair), timeout=20)
        caplog.clear()
        # Eight status periods without the control plane.
        await pair.karmada.faults.go_offline(period.total_seconds() * 8)
        await wait_for(lambda: _back(pair), timeout=20)
        await wait_for(lambda: _said(caplog, REACHABLE), timeout=20)
        records = list(caplog.records)
        body = await _metrics(agent)
        agent.stop_event.set()
        assert await asyncio.wait_for(task, 15) == EXIT_OK

    said = [(r.levelno, r.getMessage()) for r in records]
    assert [m for lvl, m in said if UNREACHABLE in m] == [
        m for lvl, m in said if UNREACHABLE in m and lvl == logging.WARNING
    ]
    assert len([m for _, m in said if UNREACHABLE in m]) == 1
    assert len([m for lvl, m in said if REACHABLE in m and lvl == logging.INFO]) == 1
    assert [r for r in records if r.exc_info] == []
    assert [m for lvl, m in said if lvl >= logging.ERROR] == []
    # Everything else about the outage is below warning level.
    assert [m for lvl, m in said if lvl == logging.WARNING and UNREACHABLE not in m] == []
    assert "karmada_agent_control_plane_unreachable_total 1.0" in body


async def _said(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records)
