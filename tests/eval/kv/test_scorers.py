"""The scoring choices the KV benchmark left out of the public API (rcattr.eval.kv.scorers), against brute force
and inside RCKVCache."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.eval.kv.scorers import (
    AblationScorer,
    BlendedScorer,
    MaxPooledScorer,
    QueryMaxScorer,
    SoftmaxMaxScorer,
)
from rcattr.kvcache import DistilledScorer, EvictionPolicy, Ratio, RCKVCache, ScorePredictor, WindowScorer
from rcattr.kvcache.distilled import predictor_identity
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, prompt
from tests.helpers.blocks import random_window, window_strategies
from tests.reference.kv import assert_equals_masking_the_evicted_positions, brute_scores


@settings(max_examples=40, deadline=None)
@given(
    **window_strategies(),
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


def _pooled_brute_force(logits, visible, kv_heads, per_query) -> torch.Tensor:
    """``[B, kv_heads, m]``: the max over the window queries that see a key, and over its key head's query heads, of
    ``per_query(b, h, j, i)``; nan where no query sees it."""
    batch, heads, w, n = logits.shape
    m = n - w
    out = torch.full((batch, heads, m), float("nan"), dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            for i in range(m):
                values = [per_query(b, h, j, i) for j in range(w) if visible[b, j, i]]
                if values:
                    out[b, h, i] = max(values)
    return out.view(batch, kv_heads, heads // kv_heads, m).amax(2)


@settings(max_examples=30, deadline=None)
@given(**window_strategies())
def test_the_max_pooled_scorers_equal_brute_force(seed, window, context, pad, kv_heads) -> None:
    logits, visible = random_window(seed, window, context, pad)
    n, m = window + context, context
    reference = min(3, window)
    own_rows = range(window - reference, window)

    def window_rc(b, h, j, i):  # RC against the last `reference` window queries' own logits
        own = [logits[b, h, r, c] for r in own_rows for c in range(n - reference, n) if visible[b, r, c]]
        return sum(max(float(logits[b, h, j, i] - y), 0.0) for y in own) / len(own)

    def query_rc(b, h, j, i):  # RC against the query's own logits on the keys before the window
        own = [logits[b, h, j, c] for c in range(m) if visible[b, j, c]]
        return sum(max(float(logits[b, h, j, i] - y), 0.0) for y in own) / len(own)

    def weight(b, h, j, i):
        row = logits[b, h, j].masked_fill(~visible[b, j], float("-inf")) * 0.5
        return float(row.softmax(-1)[i])

    scorers = [
        (MaxPooledScorer(dtype=torch.float64, reference=reference), window_rc),
        (QueryMaxScorer(dtype=torch.float64, top=n), query_rc),
        (SoftmaxMaxScorer(dtype=torch.float64, scale=0.5), weight),
    ]
    for scorer, per_query in scorers:
        got = scorer.key_head_scores(logits, visible, kv_heads)
        torch.testing.assert_close(
            got, _pooled_brute_force(logits, visible, kv_heads, per_query), equal_nan=True
        )


def test_a_query_scores_only_its_top_keys() -> None:
    logits, visible = random_window(0, 4, 12, 0)
    every = QueryMaxScorer(dtype=torch.float64, top=12).key_head_scores(logits, visible, 2)
    top = QueryMaxScorer(dtype=torch.float64, top=2).key_head_scores(logits, visible, 2)
    scored = top > 0
    assert scored.any() and not scored.all()
    assert bool((top <= every + 1e-12).all())  # a lower bound: some queries' values are left out
    torch.testing.assert_close(top.amax(-1), every.amax(-1))  # the best key is some query's first


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_a_blend_at_either_end_keeps_what_its_one_score_keeps(share) -> None:
    model = kv_model("llama")
    config = model.config
    generator = torch.Generator().manual_seed(0)
    layers = range(config.num_hidden_layers)
    predictor = ScorePredictor(
        predictor_identity(model),
        {i: torch.randn(config.hidden_size, config.num_key_value_heads, generator=generator) for i in layers},
        {i: torch.zeros(config.num_key_value_heads) for i in layers},
    )
    alone = DistilledScorer(predictor=predictor) if share == 0.0 else WindowScorer()
    ids = torch.randint(3, 120, (1, 48))
    kept = []
    for scorer in (BlendedScorer(predictor=predictor, window_share=share), alone):
        cache = RCKVCache(model, window=4, policy=EvictionPolicy(Ratio(0.5, scope="layer"), scorer))
        with torch.no_grad():
            model(ids, **cache_argument(model, cache))
        kept.append(cache.kept_indices)
    for blended, single in zip(*kept, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(blended, single, strict=True))
    with pytest.raises(ValueError, match="window_share"):
        BlendedScorer(predictor=predictor, window_share=1.5)
