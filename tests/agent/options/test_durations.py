"""Go durations (agent/options/durations.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent.options.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10s", timedelta(seconds=10)),
        ("2m", timedelta(minutes=2)),
        ("1000s", timedelta(seconds=1000)),
        ("16m40s", timedelta(seconds=1000)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5h", timedelta(minutes=90)),
        ("300ms", timedelta(milliseconds=300)),
        ("5ms", timedelta(milliseconds=5)),
        ("1500us", timedelta(microseconds=1500)),
        ("1500\u00b5s", timedelta(microseconds=1500)),
        ("2h45m30.5s", timedelta(hours=2, minutes=45, seconds=30.5)),
        ("0", timedelta(0)),
        ("-1s", timedelta(seconds=-1)),
        ("+3s", timedelta(seconds=3)),
        (".5s", timedelta(milliseconds=500)),
        ("1.s", timedelta(seconds=1)),
    ],
)
def test_parse_duration_accepts_go_syntax(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "10", "s", "1x", "1.2.3s", ".s", "1 s", "-", "1e3s", "10S"])
def test_parse_duration_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(milliseconds=5), "5ms"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(minutes=5), "5m0s"),
        (timedelta(seconds=1000), "16m40s"),
        (timedelta(minutes=90), "1h30m0s"),
        (timedelta(seconds=-40), "-40s"),
        (timedelta(microseconds=1500), "1.5ms"),
    ],
)
def test_format_duration_matches_go(value: timedelta, text: str) -> None:
    assert format_duration(value) == text
