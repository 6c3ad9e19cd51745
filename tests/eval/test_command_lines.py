"""The five benchmarks' command lines: one shape (``--out``, ``--model``, ``--report-only``), parsed before torch
loads, and the method names they list equal to the methods their registries build."""

from __future__ import annotations

import pytest

from tests.helpers.commands import command_help

BENCHMARKS = ("attribution", "kv", "kv_long", "citations", "groundedness")


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_help_answers_without_torch_and_names_the_shared_options(benchmark: str) -> None:
    text, heavy = command_help(f"rcattr.eval.{benchmark}")
    assert f"python -m rcattr.eval.{benchmark}" in text
    assert all(option in text for option in ("--out", "--model", "--report-only"))
    assert heavy == []


def test_the_listed_method_names_are_the_registries() -> None:
    from rcattr.eval.attribution import config as attribution
    from rcattr.eval.attribution.methods import default_methods
    from rcattr.eval.groundedness import cli as groundedness
    from rcattr.eval.groundedness.pairs import TASKS
    from rcattr.eval.kv import config as kv
    from rcattr.eval.kv.registry import default_kv_methods
    from rcattr.eval.kv_long import config as kv_long
    from rcattr.eval.kv_long.methods import long_methods

    assert tuple(default_methods()) == attribution.METHODS
    assert tuple(default_kv_methods()) == kv.METHODS
    assert tuple(long_methods()) == kv_long.METHODS
    assert tuple(TASKS) == groundedness.PAIRED_TASKS
