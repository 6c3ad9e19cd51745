"""The scoring choices the KV benchmark left out of the public API (rcattr.eval.kv.scorers), against brute force
and inside RCKVCache."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.eval.kv.scorers import AblationScorer
from rcattr.kvcache import EvictionPolicy, RCKVCache, WindowScorer
from tests.helpers import kv_model, prompt
from tests.helpers.blocks import random_window
from tests.reference.kv import assert_equals_masking_the_evicted_positions, brute_scores


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    window=st.integers(1, 5),
    context=st.integers(1, 7),
    pad=st.integers(0, 4),
    kv_heads=st.sampled_from([1, 2]),
    reduce=st.sampled_from(["mean", "max"]),
    statistic=st.sampled_from(["expected", "upper_bound"]),
)
def test_window_scores_equal_brute_force(seed, window, context, pad, kv_heads, reduce, statistic) -> None:
    logits, visible = random_window(seed, window, context, pad)
    scorer = AblationScorer(dtype=torch.float64, statistic=statistic, group_reduce=reduce)
    got = scorer.key_head_scores(logits, visible, kv_heads)
    want = brute_scores(logits, visible, kv_heads, reduce, statistic)
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize(
    "scorer", [AblationScorer(statistic="upper_bound"), AblationScorer(group_reduce="max")]
)
def test_rckvcache_with_an_ablation_scorer_still_equals_masking_the_evicted_positions(attn, scorer) -> None:
    model = kv_model("qwen3", attn)
    ids, mask = prompt(batch=2, pad=5)
    chunks = [torch.randint(3, 120, (2, q)) for q in (3, 1)]
    cache = RCKVCache(model, window=4, policy=EvictionPolicy(scorer=scorer))
    assert_equals_masking_the_evicted_positions(model, cache, ids, mask, chunks)


def test_the_default_ablation_scores_like_the_window_scorer() -> None:
    logits, visible = random_window(0, 4, 6, 2)
    values = torch.randn(2, 2, 10, 3, dtype=torch.float64)
    want = WindowScorer(dtype=torch.float64)(logits, visible, values)
    torch.testing.assert_close(
        AblationScorer(dtype=torch.float64)(logits, visible, values), want, equal_nan=True
    )


@pytest.mark.parametrize(
    ("options", "named"), [({"statistic": "median"}, "statistic"), ({"group_reduce": "sum"}, "group_reduce")]
)
def test_bad_ablation_settings_are_named(options, named) -> None:
    with pytest.raises(ValueError, match=named):
        AblationScorer(**options)
