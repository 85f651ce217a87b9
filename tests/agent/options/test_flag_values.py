"""Flag values as pflag reads them (agent/options/flag_values.py)."""

from __future__ import annotations

import pytest

from agent.options.flag_values import parse_float, parse_go_bool, parse_int, parse_string_list


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_go_true(text: str) -> None:
    assert parse_go_bool(text) is True


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_go_false(text: str) -> None:
    assert parse_go_bool(text) is False


@pytest.mark.parametrize("text", ["", "yes", "on", "tRuE", "2"])
def test_go_refuses_other_booleans(text: str) -> None:
    with pytest.raises(ValueError, match="invalid boolean"):
        parse_go_bool(text)


def test_integers_are_decimal() -> None:
    assert parse_int("-12") == -12
    for text in ("1.5", "0x10", ""):
        with pytest.raises(ValueError, match="invalid integer"):
            parse_int(text)


def test_numbers_are_finite() -> None:
    assert parse_float("0.25") == 0.25
    assert parse_float("40") == 40.0
    for text in ("nan", "inf", "-inf", "x"):
        with pytest.raises(ValueError, match="invalid number"):
            parse_float(text)


def test_string_lists_are_one_csv_record() -> None:
    assert parse_string_list("") == []
    assert parse_string_list("a, b ,c") == ["a", "b", "c"]
    assert parse_string_list('"x,y",z') == ["x,y", "z"]
    assert parse_string_list("a,,b") == ["a", "", "b"]
