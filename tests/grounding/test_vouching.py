"""How much the documents vouch for a sentence (rcattr.grounding.vouching): its support, its status and its held part's."""

from __future__ import annotations

import pytest

from rcattr.grounding.claims import Claim
from rcattr.grounding.vouching import (
    UNHELD_NAME,
    partly_held,
    sentence_status,
    sentence_support,
    sentence_vouching,
    support_status,
)
from tests.helpers.cited import supported_result


def _claim(kind: str, held: bool) -> Claim:
    return Claim(0, 1, "x", kind, held)


def test_sentence_support_is_the_mean_capped_by_its_unheld_claims() -> None:
    assert sentence_support([0.9, 0.7], []) == pytest.approx(0.8) and sentence_support([], []) == 1.0
    assert sentence_support([0.9], [_claim("number", False), _claim("name", True)]) == 0.0
    assert sentence_support([0.9], [_claim("date", True), _claim("name", False)]) == UNHELD_NAME


@pytest.mark.parametrize(("support", "status"), [(0.5, "supported"), (0.49, "weak"), (0.24, "unsupported")])
def test_support_status_reads_fixed_odds(support: float, status: str) -> None:
    assert support_status(support) == status


def test_the_held_part_leaves_out_the_unheld_claims_and_the_markers() -> None:
    """Issue 59: "95" is in no document; "[3]" is a marker, neither a claim nor a token of the sentence."""
    answer = "It is 330 metres tall, 95 wide [3]. It opened in 1889! Bread <3"
    support = [0.9, 0.9, 0.9, 0.9, 0.9, 0.1, 0.6, 0.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]
    result = supported_result(support, answer)
    claims, whole, held = sentence_vouching(result, 0, 35, [frozenset({"330", "metres"})])
    assert [(c.text, c.held) for c in claims] == [("330", True), ("95", False)]
    assert whole == 0.0 and held == pytest.approx((0.9 * 5 + 0.6) / 6)
    none_held, whole, held = sentence_vouching(result, 0, 35, [])
    assert not any(c.held for c in none_held) and whole == held == 0.0  # nothing held: judged whole


def test_a_sentence_of_held_and_unheld_claims_is_partial_when_its_held_part_is_supported() -> None:
    mixed = [_claim("number", True), _claim("number", False)]
    assert partly_held(mixed) and not partly_held(mixed[:1]) and not partly_held(mixed[1:])
    assert not partly_held([])
    assert sentence_status(0.9, mixed) == "partial" and sentence_status(0.4, mixed) == "weak"
    assert sentence_status(0.9, mixed[:1]) == "supported"
