"""Sentence-level signals (rcattr.eval.groundedness.sentence_signals): what a stored row's pieces give."""

from __future__ import annotations

from rcattr.eval.groundedness.sentence_signals import derived


def test_derived_signals_read_the_claims_of_a_row() -> None:
    row = {
        "vouch": 0.4,
        "support": 0.5,
        "coverage": 0.75,
        "logprob": -1.0,
        "neg_entropy": -2.0,
        "lookback": 0.3,
        "claims": [["number", False, 0.2], ["name", True, 0.9]],
    }
    signals = derived(row)
    assert signals["claims_held"] == 0.0 and signals["claims_rc"] == 0.2 and signals["coverage"] == 0.75
    assert derived({**row, "claims": []})["claims_rc"] == 1.0
