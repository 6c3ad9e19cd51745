"""Attribution metrics (rcattr.eval.common.metrics) on hand-made cases."""

from __future__ import annotations

import math

import pytest
import torch

from rcattr.eval.common.datasets import BenchmarkRecord, GoldSpan
from rcattr.eval.common.metrics import (
    accuracy,
    bootstrap_interval,
    location_hits,
    paired_difference,
    paired_mean_difference,
    quote_location,
    source_hits,
    top_spans,
)
from rcattr.text.segmentation import TextSpan

CHUNKS = ["Alpha one. Alpha two.", "Beta one. Beta two."]


SENTENCES = [
    TextSpan(0, 10, "Alpha one.", 0),
    TextSpan(11, 21, "Alpha two.", 0),
    TextSpan(0, 9, "Beta one.", 1),
]


RECORD = BenchmarkRecord(
    id="r",
    question="q",
    chunks=CHUNKS,
    answer="Alpha two and Beta one, paraphrased",
    gold=[
        GoldSpan(0, 9, "Alpha two", 0),
        GoldSpan(14, 22, "Beta one", 1),
        GoldSpan(24, 35, "paraphrased", 1),
    ],
)


def test_top_spans_breaks_ties_by_lowest_index() -> None:
    assert top_spans(torch.tensor([[0.2, 0.5, 0.5], [0.0, 0.0, 0.0]])) == [1, 0]


def test_source_hits_score_the_source_of_the_top_span() -> None:
    scores = torch.tensor([[0.1, 0.8, 0.1], [0.6, 0.0, 0.4], [0.0, 0.1, 0.9]])
    assert source_hits(scores, SENTENCES, RECORD.gold) == [True, False, True]
    with pytest.raises(ValueError, match="2 output units for 3 gold spans"):
        source_hits(scores[:2], SENTENCES, RECORD.gold)


def test_location_hits_need_the_quoted_sentence() -> None:
    assert quote_location(RECORD.gold[0], CHUNKS) == (11, 20)
    assert quote_location(RECORD.gold[2], CHUNKS) is None
    # span 0: the right chunk but the wrong sentence; span 1: the quoted sentence; span 2: not a quote
    scores = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.1, 0.9], [1.0, 0.0, 0.0]])
    assert location_hits(scores, SENTENCES, RECORD) == [False, True, None]
    assert source_hits(scores, SENTENCES, RECORD.gold) == [True, True, False]


def test_accuracy_ignores_undefined_hits() -> None:
    assert accuracy([True, False, None, True]) == (pytest.approx(2 / 3), 3)
    value, count = accuracy([None])
    assert math.isnan(value) and count == 0


def test_bootstrap_interval_resamples_records() -> None:
    # one record of 10 spans all right, one of 10 all wrong: resampling records gives 0%, 50% or 100%
    hits = [[True] * 10, [False] * 10]
    low, high = bootstrap_interval(hits, n_boot=4000)
    assert low == 0.0 and high == 1.0
    # identical records: no spread at all, and undefined spans do not count
    assert bootstrap_interval([[True, False, None]] * 5) == (0.5, 0.5)
    assert math.isnan(bootstrap_interval([[None]])[0])


def test_bootstrap_interval_covers_the_accuracy_and_narrows_with_records() -> None:
    pattern = [[True, True, False], [True], [False, True], [True, True, True, False]]
    small = bootstrap_interval(pattern * 5)
    large = bootstrap_interval(pattern * 80)
    point = accuracy([hit for row in pattern for hit in row])[0]
    assert small[0] <= point <= small[1] and large[0] <= point <= large[1]
    assert large[1] - large[0] < (small[1] - small[0]) / 2


def test_paired_difference_cancels_what_both_methods_share() -> None:
    # b is right wherever a is, plus one span in each record: the difference never varies
    a = [[True, False, False], [False, True, False], [True, True, False]] * 10
    b = [[True, True, False], [True, True, False], [True, True, True]] * 10
    difference, low, high = paired_difference(b, a)
    assert difference == pytest.approx(1 / 3) and low == pytest.approx(1 / 3) and high == pytest.approx(1 / 3)
    # unpaired, the same records would give wide intervals
    assert bootstrap_interval(a)[1] - bootstrap_interval(a)[0] > 0.1
    opposite = paired_difference(a, b)
    assert opposite[0] == pytest.approx(-1 / 3) and opposite[2] < 0
    # a real tie straddles zero
    coin = [[i % 2 == 0] for i in range(60)]
    tie = paired_difference(coin, coin[1:] + coin[:1])
    assert tie[1] < 0 < tie[2]


def test_paired_difference_refuses_unpaired_records() -> None:
    with pytest.raises(ValueError, match="same records"):
        paired_difference([[True]], [[True], [False]])
    with pytest.raises(ValueError, match="same defined spans"):
        paired_difference([[True, None]], [[True, False]])


def test_paired_mean_difference_cancels_what_both_records_share() -> None:
    hard = [0.1, 0.9, 0.5, 0.3, 0.7] * 8  # records differ a lot; the methods differ by 0.05 on each
    difference, low, high = paired_mean_difference([v - 0.05 for v in hard], hard)
    assert difference == pytest.approx(-0.05) and low == pytest.approx(-0.05) and high == pytest.approx(-0.05)
    noisy = paired_mean_difference([v + (0.1 if i % 2 else -0.1) for i, v in enumerate(hard)], hard)
    assert noisy[1] < 0 < noisy[2]  # no difference on average: the interval straddles zero
    with pytest.raises(ValueError, match="same records"):
        paired_mean_difference([0.1], [0.1, 0.2])
    assert all(math.isnan(v) for v in paired_mean_difference([], []))
