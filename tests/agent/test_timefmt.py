"""Kubernetes time formats (agent/timefmt.py): what the agent writes, what it reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from agent.timefmt import micro_time, parse_time, rfc3339

MOMENT = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_time_and_micro_time_are_written_in_utc() -> None:
    assert rfc3339(MOMENT) == "2024-01-02T03:04:05Z"
    assert micro_time(MOMENT) == "2024-01-02T03:04:05.678901Z"
    elsewhere = MOMENT.astimezone(timezone(timedelta(hours=-5)))
    assert micro_time(elsewhere) == "2024-01-02T03:04:05.678901Z"


def test_now_by_default() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    written = parse_time(rfc3339())
    assert written is not None
    assert before <= written <= datetime.now(UTC)
    assert parse_time(micro_time()) is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-02T03:04:05Z", MOMENT.replace(microsecond=0)),
        ("2024-01-02T03:04:05.678901Z", MOMENT),
        ("2024-01-02T03:04:05.678901234Z", MOMENT),  # nanoseconds, as Go writes them
        ("2024-01-01T22:04:05.678901-05:00", MOMENT),
    ],
)
def test_any_rfc3339_time_is_read_in_utc(text: str, expected: datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected
    assert parsed is not None
    assert parsed.tzinfo == UTC


@pytest.mark.parametrize(
    "text", ["2024-01-02", "2024-01-02T03:04:05", "2024-01-02 03:04:05Z", "soon", "", None, 17]
)
def test_what_is_not_rfc3339_reads_as_none(text: object) -> None:
    assert parse_time(text) is None
