"""The signals of an AttributionBench row (rcattr.eval.groundedness.claim_levers), by hand."""

from __future__ import annotations

import math

import pytest

from rcattr.eval.groundedness.claim_levers import (
    MARK_SIGNALS,
    SIGNALS,
    claim_signals,
    content_words_support,
    heads_coverage,
    logit,
    marked,
    sigmoid,
    signal_matrix,
)
from rcattr.grounding.support import SUPPORT_LOG_ODDS_THRESHOLD


def row(**changes) -> dict:
    base = {
        "support": 0.8,
        "status": "supported",
        "coverage": 0.5,
        "judge": 0.0,
        "logprob": -1.0,
        "neg_entropy": -2.0,
        "lookback": 0.3,
        "claims": [],
        # tokens: "The", " cat", " sat", "."; content words cat (held) and sat (not held)
        "log_odds": [3.0, 2.0, -2.0, 5.0],
        "token_logprob": [-9.0, -0.5, -3.0, -0.1],
        "words": [[1, [1]], [0, [2]]],
    }
    return {**base, **changes}


def test_content_words_support_averages_the_content_tokens_only_and_keeps_the_claims_floors() -> None:
    assert content_words_support(row()) == pytest.approx((sigmoid(2.0) + sigmoid(-2.0)) / 2)
    assert content_words_support(row(claims=[["number", False, 0.9]])) == 0.0
    assert content_words_support(row(claims=[["name", False, 0.9], ["date", True, 0.9]])) == 0.25
    assert content_words_support(row(words=[])) == 1.0


def test_heads_coverage_counts_a_word_held_or_with_no_token_flagged() -> None:
    assert heads_coverage(row()) == 0.5  # sat: log-odds -2 is below the token flag's log(1/3)
    assert -2.0 < SUPPORT_LOG_ODDS_THRESHOLD < -1.0
    assert heads_coverage(row(log_odds=[3.0, 2.0, -1.0, 5.0])) == 1.0  # a paraphrase the pass finds
    assert heads_coverage(row(words=[[0, []]])) == 0.0 and heads_coverage(row(words=[])) == 1.0


def test_fused_coverage_gives_the_heads_weight_by_their_certainty_and_the_judge_adds_log_odds() -> None:
    signals = claim_signals(row(support=0.8, coverage=0.2, judge=1.5))
    assert signals["fused_coverage"] == pytest.approx(0.6 * 0.8 + 0.4 * 0.2)
    assert claim_signals(row(support=1.0, coverage=0.0))["fused_coverage"] == 1.0
    assert claim_signals(row(support=0.5, coverage=0.1))["fused_coverage"] == pytest.approx(0.1)
    assert signals["support_judge"] == pytest.approx(sigmoid(math.log(4) + 1.5))
    assert signals["judge"] == pytest.approx(sigmoid(1.5)) and list(signals) == list(SIGNALS)
    assert claim_signals(row(support=0.0))["support_judge"] < 1e-5  # support 0 stays near 0, not nan
    assert logit(sigmoid(0.7)) == pytest.approx(0.7)


def test_marks_are_the_status_for_support_and_even_odds_for_the_probabilities() -> None:
    r = row(status="partial", support=0.9, coverage=0.4)
    marks = marked(r, claim_signals(r))
    assert marks["support"] and marks["coverage"] and not marks["judge"]
    assert set(marks) == {"support", *MARK_SIGNALS} and "logprob" not in marks
    assert not marked(row(), claim_signals(row()))["support"]
    assert signal_matrix([row(), row(support=0.1)], ["support", "coverage"]) == [[0.8, 0.5], [0.1, 0.5]]
