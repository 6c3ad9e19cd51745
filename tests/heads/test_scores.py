"""Head scores (rcattr.heads.scores) against brute force, scale-freedom of the default, and head counts."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.heads.scores import (
    OUTLIER_SIGMAS,
    fixed_heads,
    head_count,
    layer_rc,
    layer_superiority,
    min_heads,
    outlier_count,
    outlier_heads,
    seeing_heads,
    top_heads,
)
from tests.helpers.blocks import random_layer
from tests.helpers.device_reads import DeviceReads


def _pairs(head: int) -> tuple[list[float], list[float]]:
    cross, cross_visible, own, own_visible = random_layer()
    return cross[head][cross_visible].tolist(), own[head][own_visible].tolist()


@pytest.mark.parametrize("kind", ["superiority", "rc", "rc_std"])
def test_head_scores_match_brute_force(kind: str) -> None:
    scores = layer_rc(*random_layer(), kind=kind).head_scores  # type: ignore[arg-type]
    for head in range(3):
        x, y = _pairs(head)
        if kind == "superiority":
            expected = sum(a > b for a in x for b in y) / (len(x) * len(y))
        else:
            expected = sum(max(a - b, 0) for a in x for b in y) / (len(x) * len(y))
            if kind == "rc_std":
                expected /= torch.tensor(y, dtype=torch.float64).std(correction=0).item()
        assert scores[head].item() == pytest.approx(expected, rel=1e-9)
    assert torch.equal(layer_rc(*random_layer(), kind="superiority").every_score[kind], scores)


@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.bfloat16]
)  # the compiled CPU kernel, torch.searchsorted
def test_superiority_from_counts_is_layer_rcs_without_reading_the_device(dtype: torch.dtype) -> None:
    cross, cross_visible, own, own_visible = (
        t.to(dtype) if t.is_floating_point() else t for t in random_layer()
    )
    with DeviceReads() as reads:
        counted = layer_superiority(cross, cross_visible, own, own_visible)
    assert reads.total == 0  # inside the forward, a read from a GPU would wait for its queue once a layer
    exact = layer_rc(cross, cross_visible, own, own_visible)
    assert torch.equal(counted.head_scores, exact.head_scores)
    assert torch.equal(counted.row_below, exact.row_below)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.01, 100.0), min_size=3, max_size=3))
def test_scale_free_scores_ignore_per_head_logit_scales(scales: list[float]) -> None:
    cross, cross_visible, own, own_visible = random_layer(1)
    factor = torch.tensor(scales, dtype=torch.float64)[:, None, None]
    for kind in ("superiority", "rc_std"):
        before = layer_rc(cross, cross_visible, own, own_visible, kind).head_scores  # type: ignore[arg-type]
        after = layer_rc(cross * factor, cross_visible, own * factor, own_visible, kind).head_scores  # type: ignore[arg-type]
        torch.testing.assert_close(before, after)


def test_raw_rc_follows_the_scale() -> None:
    cross, cross_visible, own, own_visible = random_layer()
    before = layer_rc(cross, cross_visible, own, own_visible, "rc").head_scores
    after = layer_rc(cross * 10, cross_visible, own * 10, own_visible, "rc").head_scores
    torch.testing.assert_close(after, before * 10)


def test_no_visible_context_scores_zero() -> None:
    cross, _, own, own_visible = random_layer()
    hidden = torch.zeros(4, 5, dtype=torch.bool)
    assert layer_rc(cross, hidden, own, own_visible).head_scores.tolist() == [0.0, 0.0, 0.0]


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown head score 'max'"):
        layer_rc(*random_layer(), kind="max")  # type: ignore[arg-type]


SCORES = torch.tensor([[0.1, 0.9, 0.3], [0.5, 0.2, 0.8]])


def test_top_and_bottom_heads() -> None:
    assert top_heads(SCORES, 2).tolist() == [[0, 1], [1, 2]]
    assert top_heads(SCORES, 2, bottom=True).tolist() == [[0, 0], [1, 1]]
    assert top_heads(SCORES, 0.5).shape == (3, 2)
    assert top_heads(SCORES, 1.0).shape == (6, 2)


@pytest.mark.parametrize("k", [0, 7, -1, 1.5, 0.0])
def test_top_heads_reject_bad_k(k: float) -> None:
    with pytest.raises(ValueError, match="model.s 6 heads|model has 6"):
        top_heads(SCORES, k)


def test_fixed_heads() -> None:
    assert fixed_heads([(1, 2), (0, 0)], 2, 3).tolist() == [[1, 2], [0, 0]]
    with pytest.raises(ValueError, match=r"head \(2, 0\) does not exist; the model has 2 layers x 3 heads"):
        fixed_heads([(2, 0)], 2, 3)
    with pytest.raises(ValueError, match="empty"):
        fixed_heads([], 2, 3)


def test_row_statistics_match_brute_force() -> None:
    cross, cross_visible, own, own_visible = random_layer()
    stats = layer_rc(cross, cross_visible, own, own_visible)
    for head in range(3):
        y = own[head][own_visible].tolist()  # Y(g, g): the same reference for every row
        for row in range(4):
            x = cross[head, row][cross_visible[row]].tolist()
            forward = sum(max(a - b, 0) for a in x for b in y) / (len(x) * len(y))
            reverse = sum(max(b - a, 0) for a in x for b in y) / (len(x) * len(y))
            assert stats.context_rc[head, row].item() == pytest.approx(forward, rel=1e-9)
            assert stats.self_rc[head, row].item() == pytest.approx(reverse, rel=1e-9, abs=1e-12)
            assert stats.context_peak[head, row].item() == pytest.approx(sum(b < max(x) for b in y) / len(y))


def test_a_row_that_sees_no_context_has_no_support() -> None:
    cross, cross_visible, own, own_visible = random_layer()
    cross_visible[2] = False
    stats = layer_rc(cross * 1e3, cross_visible, own, own_visible)
    assert stats.context_peak[:, 2].tolist() == [0.0, 0.0, 0.0]
    assert bool((stats.context_peak[:, 1] == 1).all())  # huge context logits beat every self logit


def test_outlier_heads_adapt_to_the_score_table() -> None:
    scores = torch.zeros(4, 6)
    scores[1, 2], scores[3, 0] = 5.0, 4.0  # two heads far above the other 22
    assert outlier_count(scores) == 2
    assert outlier_heads(scores).tolist() == [[1, 2], [3, 0]]
    assert outlier_count(torch.arange(24.0).view(4, 6)) == 0
    assert outlier_heads(torch.arange(24.0).view(4, 6)).tolist() == [[3, 5]]  # none stands out: the best one
    floor = outlier_heads(scores, at_least=3)  # a floor of heads: the outliers, then the best of the rest
    assert len(floor) == 3 and floor[:2].tolist() == [[1, 2], [3, 0]]
    assert outlier_heads(scores, 100.0, at_least=0).numel() == 0
    assert head_count(scores, 0.25) == 6 and head_count(scores, 3) == 3
    for bad in ("outliers", True):  # the outlier heads are outlier_heads (OutlierHeads), not a count
        with pytest.raises(ValueError, match="a number of heads or a fraction"):
            head_count(scores, bad)  # type: ignore[arg-type]


def test_outlier_rule_can_pick_one_head_and_the_minimum_states_how_few_that_is() -> None:
    # the held-out 24 x 14 model's shape: one head far out, the rest spread evenly
    scores = torch.linspace(0.4, 0.6, 336, dtype=torch.float64).view(24, 14)
    scores[15, 7] = 0.99
    assert outlier_count(scores) == 1 and outlier_heads(scores).tolist() == [[15, 7]]
    assert [min_heads(n) for n in (1, 8, 20, 72, 270, 336)] == [1, 1, 1, 4, 14, 17]


@given(st.integers(1, 40), st.integers(1, 16), st.integers(0, 2**31 - 1))
@settings(max_examples=50, deadline=None)
def test_outlier_count_against_brute_force(layers: int, heads: int, seed: int) -> None:
    scores = torch.randn(layers, heads, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    flat = scores.flatten().tolist()
    mean = sum(flat) / len(flat)
    spread = math.sqrt(sum((x - mean) ** 2 for x in flat) / len(flat))
    brute = sum(x > mean + 2 * spread for x in flat)
    assert outlier_count(scores) == brute
    assert len(outlier_heads(scores)) == max(brute, 1)


def test_the_heads_that_see_are_those_of_the_layers_that_see_the_whole_context() -> None:
    reach = torch.tensor([0.2, 1.0, 0.5, 1.0], dtype=torch.float64)
    assert seeing_heads(reach, 3).tolist() == [[False] * 3, [True] * 3, [False] * 3, [True] * 3]
    # where no layer sees the whole context, the layers that see the most of it
    assert seeing_heads(torch.tensor([0.2, 0.5, 0.5]), 2).tolist() == [[False] * 2, [True] * 2, [True] * 2]


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(2, 5), st.integers(0, 10_000), st.sampled_from([3, 0.25, "outliers"]))
def test_top_heads_among_some_heads_match_brute_force(layers: int, heads: int, seed: int, k) -> None:
    generator = torch.Generator().manual_seed(seed)
    scores = torch.rand(layers, heads, generator=generator, dtype=torch.float64)
    among = (torch.rand(layers, 1, generator=generator) < 0.6).repeat(1, heads)  # whole layers, as windows
    among[0] = True  # at least one layer
    chosen = outlier_heads(scores, among=among) if k == "outliers" else top_heads(scores, k, among=among)
    cells = [(layer, head) for layer in range(layers) for head in range(heads) if among[layer, head]]
    pool = sorted(((float(scores[cell]), *cell) for cell in cells), reverse=True)
    values = torch.tensor([value for value, _, _ in pool], dtype=torch.float64)
    if k == "outliers":
        count = max(1, int((values > values.mean() + OUTLIER_SIGMAS * values.std(correction=0)).sum()))
    else:
        count = min(max(1, round(k * scores.numel())) if isinstance(k, float) else k, len(pool))
    assert chosen.tolist() == [cell for _, *cell in pool[:count]]
    # among every head is the plain ranking
    if k == "outliers":
        assert torch.equal(outlier_heads(scores, among=torch.ones_like(among)), outlier_heads(scores))
    else:
        assert torch.equal(top_heads(scores, k, among=torch.ones_like(among)), top_heads(scores, k))
