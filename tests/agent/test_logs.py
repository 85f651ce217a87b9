"""Logging setup and secret redaction (agent/logs.py)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from agent.logs import (
    REDACTED,
    configure_logging,
    get_logger,
    level_for_verbosity,
    redact,
    redact_secrets,
    redact_text,
)

TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJl"
OPAQUE = "s3cr3t-opaque-value"
KEY_PEM = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIKey\n-----END EC PRIVATE KEY-----\n"


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def secret_bearing_event() -> dict[str, Any]:
    return {
        "headers": {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"},
        "header_list": [("authorization", f"Bearer {OPAQUE}"), ("user-agent", "karmada-agent")],
        "kubeconfig": {
            "users": [
                {"name": "u", "user": {"client-key-data": OPAQUE, "token": OPAQUE}},
            ]
        },
        "secret": {
            "kind": "Secret",
            "metadata": {
                "name": "member1",
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": (
                        '{"kind":"Secret","data":{"token":"' + OPAQUE + '"}}'
                    )
                },
            },
            "data": {"token": OPAQUE, "ca.crt": "Y2E="},
            "stringData": {"password": OPAQUE},
        },
        "bootstrap_token": "abcdef.0123456789abcdef",
        "message": f"GET /api?token={OPAQUE} failed; key {KEY_PEM}",
        "body": b'{"kind":"Secret","data":{"token":"' + OPAQUE.encode() + b'"}}',
        "password": OPAQUE,
    }


def test_capture_logs_never_sees_a_token() -> None:
    with capture_logs(processors=[redact_secrets]) as captured:
        structlog.get_logger().info("request", **secret_bearing_event())
        structlog.get_logger().info("plain", detail=f"Authorization: Bearer {TOKEN}")
    dumped = repr(captured)
    assert TOKEN not in dumped
    assert OPAQUE not in dumped
    assert "0123456789abcdef" not in dumped
    assert "MHcCAQEEIKey" not in dumped
    first = captured[0]
    assert first["headers"]["Authorization"] == REDACTED
    assert first["headers"]["Accept"] == "application/json"  # non-secrets are kept
    assert first["header_list"][1] == ("user-agent", "karmada-agent")
    assert first["secret"]["metadata"]["name"] == "member1"
    assert set(first["secret"]["data"]) == {"token", "ca.crt"}  # keys kept, values gone
    assert first["bootstrap_token"] == REDACTED
    assert "abcdef." in redact_text("join with abcdef.0123456789abcdef")  # the id stays


def test_redaction_does_not_modify_the_logged_objects() -> None:
    event = secret_bearing_event()
    redact(event)
    assert event["kubeconfig"]["users"][0]["user"]["token"] == OPAQUE


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_configured_output_never_contains_secrets(log_format: str) -> None:
    stream = io.StringIO()
    configure_logging(verbosity=6, log_format=log_format, stream=stream)
    get_logger("agent.test").info("request", **secret_bearing_event())
    logging.getLogger("httpx").info("HTTP Request: GET %s Bearer %s", "https://x", TOKEN)
    logging.getLogger("kubernetes.client").warning("key was %s", KEY_PEM)
    try:
        raise RuntimeError(f"unauthorized with token: {OPAQUE}")
    except RuntimeError:
        get_logger("agent.test").exception("failed", local_token=OPAQUE)
    output = stream.getvalue()
    assert "HTTP Request" in output
    assert TOKEN not in output
    assert OPAQUE not in output
    assert "MHcCAQEEIKey" not in output


def test_json_when_not_a_tty_with_iso_utc_timestamps_and_context() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    with structlog.contextvars.bound_contextvars(cluster="member1", work="karmada-es-member1/w"):
        get_logger("agent.test").info("applied", manifests=3)
    [event] = lines(stream)
    assert event["event"] == "applied"
    assert event["level"] == "info"
    assert event["cluster"] == "member1"
    assert event["work"] == "karmada-es-member1/w"
    assert event["timestamp"].endswith("Z")
    assert "T" in event["timestamp"]


def test_console_renderer_on_a_tty() -> None:
    stream = TtyStream()
    configure_logging(stream=stream)
    get_logger("agent.test").info("applied", manifests=3)
    text = stream.getvalue()
    assert "applied" in text
    assert "manifests" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


def test_json_exceptions_carry_no_locals() -> None:
    stream = io.StringIO()
    configure_logging(log_format="json", stream=stream)

    def failing() -> None:
        api_token = OPAQUE  # a local that must not be shown
        raise ValueError(f"boom {len(api_token)}")

    try:
        failing()
    except ValueError:
        get_logger("agent.test").exception("failed")
    [event] = lines(stream)
    assert event["exception"][0]["exc_type"] == "ValueError"
    assert all("locals" not in frame for frame in event["exception"][0]["frames"])
    assert OPAQUE not in stream.getvalue()


def test_verbosity_levels_and_noisy_libraries() -> None:
    assert level_for_verbosity(0) == logging.INFO
    assert level_for_verbosity(2) == logging.INFO
    assert level_for_verbosity(4) == logging.DEBUG

    quiet = io.StringIO()
    configure_logging(verbosity=2, log_format="json", stream=quiet)
    get_logger("agent.test").debug("hidden detail")
    get_logger("agent.test").info("shown")
    logging.getLogger("httpx").info("HTTP Request: GET https://x")
    logging.getLogger("kubernetes.client.rest").info("response body")
    logging.getLogger("httpx").warning("retrying")
    assert [e["event"] for e in lines(quiet)] == ["shown", "retrying"]

    verbose = io.StringIO()
    configure_logging(verbosity=6, log_format="json", stream=verbose)
    get_logger("agent.test").debug("detail")
    logging.getLogger("httpx").info("HTTP Request: GET https://x")
    logging.getLogger("httpcore").debug("connection details")
    assert [e["event"] for e in lines(verbose)] == ["detail", "HTTP Request: GET https://x"]


def test_stdlib_extra_fields_are_kept_and_redacted() -> None:
    stream = io.StringIO()
    configure_logging(log_format="json", stream=stream)
    logging.getLogger("kubernetes").warning("missed", extra={"job": "heartbeat", "token": OPAQUE})
    [event] = lines(stream)
    assert event["job"] == "heartbeat"
    assert event["token"] == REDACTED
    assert event["logger"] == "kubernetes"


def test_our_events_are_stdlib_records_with_their_message_formatted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without configure_logging (as in tests), events still reach the stdlib loggers whole."""
    caplog.set_level(logging.INFO, logger="agent.test")
    get_logger("agent.test").bind(work="ns/w").warning("Lease %s/%s not renewed", "ns", "n")
    [record] = caplog.records
    assert record.name == "agent.test"
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "Lease ns/n not renewed"


def test_percent_arguments_and_fields_in_the_output() -> None:
    stream = io.StringIO()
    configure_logging(log_format="json", stream=stream)
    log = get_logger("agent.test")
    log.info("created Cluster %s", "member1", name="member1", message="kept")
    log.bind(cluster="member1").warning("dict %(a)s", {"a": 1}, token=OPAQUE)
    first, second = lines(stream)
    assert first["event"] == "created Cluster member1"
    # Field names that are LogRecord attributes are fields like any other.
    assert first["name"] == "member1"
    assert first["message"] == "kept"
    assert first["logger"] == "agent.test"
    assert second["event"] == "dict 1"
    assert second["cluster"] == "member1"
    assert second["token"] == REDACTED
    assert "agent_log_fields" not in first
