"""The emulator's Kubernetes time formats (emulator/timefmt.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from emulator.timefmt import micro_time, parse_time, rfc3339

MOMENT = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_time_and_micro_time_are_written_in_utc() -> None:
    assert rfc3339(MOMENT) == "2024-01-02T03:04:05Z"
    assert micro_time(MOMENT) == "2024-01-02T03:04:05.678901Z"
    elsewhere = MOMENT.astimezone(timezone(timedelta(hours=2)))
    assert rfc3339(elsewhere) == "2024-01-02T03:04:05Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-02T03:04:05Z", MOMENT.replace(microsecond=0)),
        ("2024-01-02T03:04:05.678901Z", MOMENT),
        ("2024-01-02T03:04:05.678901234Z", MOMENT),  # nanoseconds, as Go writes them
        ("2024-01-02T05:04:05.678901+02:00", MOMENT),
    ],
)
def test_any_rfc3339_time_is_read_in_utc(text: str, expected: datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected
    assert parsed.tzinfo == UTC


@pytest.mark.parametrize(
    "text", ["2024-01-02", "2024-01-02T03:04:05", "2024-01-02 03:04:05Z", "tomorrow", ""]
)
def test_what_is_not_rfc3339_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_time(text)
