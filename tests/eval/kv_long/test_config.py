"""What a long-generation run measures: its budget, task and methods, checked without torch."""

from __future__ import annotations

import pytest

from rcattr.eval.kv_long.config import DECODING_SCORERS, METHODS, DecodeBudget, LongBenchmarkConfig


def test_the_methods_are_the_full_cache_rckvcache_then_each_decoding_press() -> None:
    assert METHODS[:4] == ("full", "rc", "rc_question", "rc_prefill_only")
    assert METHODS[4:] == tuple(f"kvpress_{scorer}" for scorer in DECODING_SCORERS)
    assert LongBenchmarkConfig("qmsum").methods == METHODS


@pytest.mark.parametrize("tokens, every", [(0, 32), (256, 0)])
def test_a_budget_and_an_interval_are_at_least_one(tokens: int, every: int) -> None:
    with pytest.raises(ValueError, match="a token budget and an interval are >= 1"):
        DecodeBudget(tokens, every)


def test_an_unknown_task_or_method_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown task 'squad'; choose from"):
        LongBenchmarkConfig("squad")
    with pytest.raises(ValueError, match="unknown method.*mine; choose from full, rc"):
        LongBenchmarkConfig("needle", methods=("rc", "mine"))
    assert LongBenchmarkConfig("needle").answer_tokens == 32
