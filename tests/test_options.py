"""The option values rcattr accepts (rcattr.options), parsed without torch."""

from __future__ import annotations

import argparse

import pytest

from rcattr.options import GRANULARITIES, OUTPUT_GRANULARITIES, parse_head_count, positive_int, settings_of


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("12", 12), ("+3", 3)])
def test_positive_int_reads_whole_numbers(text: str, value: int) -> None:
    assert positive_int(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "2.5", "x", ""])
def test_positive_int_refuses_the_rest(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="must be a whole number >= 1"):
        positive_int(text)


def test_granularities_name_the_input_and_output_units() -> None:
    assert set(GRANULARITIES) == {"token", "sentence", "chunk"}
    assert OUTPUT_GRANULARITIES[0] == "answer"


def test_parse_head_count() -> None:
    assert parse_head_count("outliers") == "outliers" and parse_head_count("7") == 7
    for bad in ("0", "-2", "all"):
        with pytest.raises(argparse.ArgumentTypeError, match="at least 1 or 'outliers'"):
            parse_head_count(bad)


def test_settings_of_takes_the_arguments_named_as_the_fields() -> None:
    import argparse
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Limits:
        queue_size: int = 64
        max_wait_ms: float = 10.0

    args = argparse.Namespace(queue_size=3, port=8000)  # port is not a field; max_wait_ms keeps its default
    assert settings_of(Limits, args) == Limits(3, 10.0)
    assert settings_of(Limits, args, max_wait_ms=1.0) == Limits(3, 1.0)
