"""The window scores and keep rules (rcattr.kvcache.scoring) against brute force, and inside RCKVCache."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from rcattr.kvcache import (
    EvictionPolicy,
    RCKVCache,
    Threshold,
    WindowScorer,
    adaptive_keep,
    budget_keep,
    fixed_ratio_keep,
    leading_tokens,
    window_rc_scores,
)
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, prompt
from tests.helpers.blocks import random_window, window_strategies
from tests.reference.kv import brute_scores

pytestmark = pytest.mark.transformers_line


@settings(max_examples=40, deadline=None)
@given(**window_strategies())
def test_window_scores_equal_brute_force(seed, window, context, pad, kv_heads) -> None:
    logits, visible = random_window(seed, window, context, pad)
    got = window_rc_scores(logits, visible, kv_heads, dtype=torch.float64)
    want = brute_scores(logits, visible, kv_heads, "mean")
    torch.testing.assert_close(got, want, equal_nan=True)
    scorer = WindowScorer(value_norm=False, dtype=torch.float64)
    values = torch.ones(2, kv_heads, logits.shape[-1], 3, dtype=torch.float64)
    torch.testing.assert_close(scorer(logits, visible, values), want, equal_nan=True)


def test_adaptive_keep_threshold_is_c_times_mean() -> None:
    scores = torch.tensor([[[0.0, 1.0, 2.0, 5.0, float("nan")]]])
    keep, threshold = adaptive_keep(scores, 1.0)
    assert threshold.item() == pytest.approx(2.0)
    assert keep.tolist() == [[[False, False, True, True, False]]]
    keep0, _ = adaptive_keep(scores, 0.0)
    assert keep0.tolist() == [[[True, True, True, True, False]]]  # c = 0 keeps every real token


def test_fixed_ratio_keeps_the_best_of_every_head() -> None:
    scores = torch.tensor([[[3.0, 1.0, 2.0, 0.0, 5.0, 4.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]])
    keep = fixed_ratio_keep(scores, ratio=0.5, window=2)  # 8 prompt tokens -> 4 kept, 2 of them the window
    assert keep.tolist() == [
        [[False, False, False, False, True, True], [False, False, False, False, True, True]]
    ]


def test_leading_tokens_skip_left_padding() -> None:
    present = torch.tensor([[True] * 6, [False, False, True, True, True, True]])
    assert leading_tokens(present, 2).tolist() == [
        [True, True, False, False, False, False],
        [False, False, True, True, False, False],
    ]
    assert not leading_tokens(present, 0).any()


def test_value_norm_multiplies_each_score_by_its_value_norm() -> None:
    model = kv_model("llama")
    ids, _ = prompt()
    plain = RCKVCache(model, window=4, policy=EvictionPolicy(Threshold(0.0), WindowScorer(value_norm=False)))
    weighted = RCKVCache(model, c=0.0, window=4)
    model(ids, **cache_argument(model, plain))
    model(ids, **cache_argument(model, weighted))
    for index in plain.rc_layers:
        norms = plain.layers[index].values[:, :, :-4].float().norm(dim=-1)  # nothing evicted at c = 0
        torch.testing.assert_close(
            weighted.evictions[index].scores[..., :-4], plain.evictions[index].scores[..., :-4] * norms
        )


def test_sinks_are_kept_in_every_head() -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2, pad=4)
    cache = RCKVCache(model, window=4, policy=EvictionPolicy(Threshold(3.0), WindowScorer(sinks=2)))
    model(ids, attention_mask=mask, **cache_argument(model, cache))
    for eviction in cache.evictions:
        assert eviction.kept[0, :, :2].all() and eviction.kept[1, :, 4:6].all()
        assert not eviction.kept[1, :, :4].any()
        assert not eviction.kept[:, :, 6:-4].all()  # c = 3 evicts others


def test_budget_keep_keeps_the_protected_then_the_best_scores() -> None:
    scores = torch.tensor([[0.5, float("nan"), 0.9, 0.1, 0.7, 0.3]])
    protected = torch.tensor([[False, False, False, True, False, False]])
    assert budget_keep(scores, protected, 3).tolist() == [[False, False, True, True, True, False]]
    assert budget_keep(scores, protected, 1).tolist() == [[False, False, False, True, False, False]]
    assert budget_keep(scores, protected, 10).sum() == 5  # padding is never kept
