"""Health, readiness and metrics endpoints."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client import CollectorRegistry

from agent.metrics import AgentMetrics
from agent.options.bind_address import BindAddress
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


async def _raw(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    await writer.wait_closed()
    return answer


async def test_methods_head_and_malformed_requests() -> None:
    serving = Serving(
        health_address=BindAddress("127.0.0.1", 0),
        metrics_address=None,
        registry=CollectorRegistry(),
        ready=lambda: (True, ""),
    )
    await serving.start()
    try:
        assert serving.health is not None
        port = serving.health.port
        answer = await _raw(port, b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")
        answer = await _raw(port, b"HEAD /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"Content-Length: 2\r\n" in answer
        assert answer.endswith(b"\r\n\r\n")  # no body for HEAD
        answer = await _raw(port, b"GET /readyz?verbose HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.endswith(b"\r\n\r\nok")
        # Not HTTP: 400, and the server keeps serving.
        assert (await _raw(port, b"hello\r\n\r\n")).startswith(b"HTTP/1.1 400 Bad Request\r\n")
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"http://127.0.0.1:{port}/healthz")).text == "ok"
    finally:
        await serving.stop()
