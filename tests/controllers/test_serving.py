"""Health, readiness and metrics endpoints."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry

from agent.metrics import AgentMetrics
from agent.options import BindAddress
from agent.serving import Serving


async def test_endpoints_and_readiness() -> None:
    registry = CollectorRegistry()
    metrics = AgentMetrics(registry)
    metrics.work_sync_workload_duration.labels(result="success").observe(0.01)
    state = {"ready": False}

    def ready() -> tuple[bool, str]:
        return (True, "") if state["ready"] else (False, "cluster registration has not finished")

    serving = Serving(
        health_address=BindAddress("127.0.0.1", 0),
        metrics_address=BindAddress("127.0.0.1", 0),
        registry=registry,
        ready=ready,
    )
    await serving.start()
    try:
        assert serving.health is not None
        assert serving.metrics is not None
        health = f"http://127.0.0.1:{serving.health.port}"
        async with httpx.AsyncClient() as http:
            response = await http.get(f"{health}/healthz")
            assert (response.status_code, response.text) == (200, "ok")
            response = await http.get(f"{health}/readyz")
            assert response.status_code == 500
            assert "cluster registration has not finished" in response.text
            state["ready"] = True
            assert (await http.get(f"{health}/readyz")).text == "ok"
            response = await http.get(f"http://127.0.0.1:{serving.metrics.port}/metrics")
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
            assert (
                'work_sync_workload_duration_seconds_count{result="success"} 1.0' in response.text
            )
            assert (await http.get(f"{health}/metrics")).status_code == 404
    finally:
        await serving.stop()


async def test_disabled_addresses_serve_nothing() -> None:
    serving = Serving(
        health_address=None,
        metrics_address=None,
        registry=CollectorRegistry(),
        ready=lambda: (True, ""),
    )
    await serving.start()
    assert serving.health is None
    assert serving.metrics is None
    await serving.stop()


async def test_port_in_use_is_an_error() -> None:
    registry = CollectorRegistry()
    first = Serving(
        health_address=BindAddress("127.0.0.1", 0),
        metrics_address=None,
        registry=registry,
        ready=lambda: (True, ""),
    )
    await first.start()
    try:
        assert first.health is not None
        second = Serving(
            health_address=BindAddress("127.0.0.1", first.health.port),
            metrics_address=None,
            registry=registry,
            ready=lambda: (True, ""),
        )
        with pytest.raises(OSError, match="address already in use"):
            await second.start()
    finally:
        await first.stop()
