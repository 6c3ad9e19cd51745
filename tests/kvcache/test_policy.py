"""Eviction policies (rcattr.kvcache.policy): their rules and scopes through RCKVCache, still exact, and the pieces refused."""

from __future__ import annotations

import pytest
import torch

from rcattr.kvcache import (
    DecodeEviction,
    EvictionPolicy,
    Ratio,
    RCKVCache,
    Threshold,
    TokenBudget,
    WindowScorer,
)
from rcattr.runtime.compat import cache_argument
from tests.default_methods import POLICIES
from tests.helpers import kv_model, prompt
from tests.reference.kv import (
    assert_equals_masking_the_evicted_positions,
)

pytestmark = pytest.mark.transformers_line


def test_protected_keys_are_kept_and_count_in_the_budget() -> None:
    scores = torch.tensor([[[0.0, 1.0, 2.0, 5.0, 4.0, 3.0]]])
    protected = torch.tensor([[[True, False, False, False, False, False]]])
    keep, threshold = Threshold(1.0).keep(scores, protected, 2, 1)
    assert threshold.item() == pytest.approx(2.5)  # the sink's score still counts in the mean
    assert keep.tolist() == [[[True, False, False, True, True, True]]]
    keep, _ = Ratio(0.5).keep(scores, protected, 2, 1)  # 8 tokens -> 4 kept, 2 of them window
    assert keep.tolist() == [[[True, False, False, True, False, False]]]


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_every_policy_still_equals_masking_the_evicted_positions(attn, policy) -> None:
    model = kv_model("qwen3", attn)
    ids, mask = prompt(batch=2, pad=5)
    chunks = [torch.randint(3, 120, (2, q)) for q in (3, 1)]
    assert_equals_masking_the_evicted_positions(
        model, RCKVCache(model, window=4, policy=policy), ids, mask, chunks
    )


def test_model_budget_is_one_threshold_over_every_layer_and_head() -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2, pad=4)
    cache = RCKVCache(model, window=4, policy=EvictionPolicy(Threshold(1.2, "model"), WindowScorer(sinks=0)))
    model(ids, attention_mask=mask, **cache_argument(model, cache))
    evictions = [e for e in cache.evictions if e is not None]
    scores = torch.stack([e.scores[..., :-4] for e in evictions])  # [L, B, Hkv, m]
    for row in range(2):
        mean = scores[:, row].nanmean()
        for eviction, layer_scores in zip(evictions, scores, strict=True):
            assert torch.equal(eviction.kept[row, :, :-4], layer_scores[row] >= 1.2 * mean)
            torch.testing.assert_close(eviction.threshold[row], (1.2 * mean).expand(2))
    per_layer = cache.layer_compression_ratio
    assert per_layer.max() - per_layer.min() > 0.01  # budgets differ across layers
    ratio = RCKVCache(model, window=4, policy=EvictionPolicy(Ratio(0.6, "model")))
    model(ids, **cache_argument(model, ratio))
    assert ratio.compression_ratio == pytest.approx(0.6, abs=1 / (3 * 2 * 40))


def test_the_paper_recipe_is_per_layer_thresholds_on_expected_rc_alone() -> None:
    model = kv_model("llama")
    ids, _ = prompt()
    paper = RCKVCache.paper(model, c=1.0, window=4)
    assert paper.policy == EvictionPolicy(Threshold(1.0, "head"), WindowScorer(value_norm=False, sinks=0))
    default = RCKVCache(model, c=1.0, window=4)
    assert default.policy == EvictionPolicy(Threshold(1.0, "model"), WindowScorer(value_norm=True, sinks=4))
    model(ids, **cache_argument(model, paper))
    for eviction in paper.evictions:  # each key head's own threshold: c times its own mean score
        before = eviction.scores[..., :-4]
        torch.testing.assert_close(eviction.threshold, before.mean(-1))


def test_ratio_mode_evicts_the_asked_share_of_every_head() -> None:
    model = kv_model("llama")
    ids, _ = prompt(length=50)
    cache = RCKVCache(model, window=5, policy=EvictionPolicy(Ratio(0.6, "head")))
    model(ids, **cache_argument(model, cache))
    assert all(int(e.kept[0, h].sum()) == 20 for e in cache.evictions if e is not None for h in range(2))
    assert cache.compression_ratio == pytest.approx(0.6)
    adaptive = RCKVCache(model, c=1.0, window=5)
    model(ids, **cache_argument(model, adaptive))
    for fixed, free in zip(
        cache.evictions, adaptive.evictions, strict=True
    ):  # same scores, different decisions
        torch.testing.assert_close(fixed.scores, free.scores, equal_nan=True)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Ratio(1.0), "ratio must be"),
        (lambda: Threshold(-1.0), "c must be"),
        (lambda: TokenBudget(0), "budget must be"),
        (lambda: Threshold(1.0, scope="global"), "scope must be one of head, layer, model"),  # type: ignore[arg-type]
        (lambda: WindowScorer(dtype=torch.float16), "dtype"),
        (lambda: WindowScorer(value_norm=1), "value_norm"),  # type: ignore[arg-type]
        (lambda: WindowScorer(sinks=-1), "sinks"),
        (lambda: WindowScorer(sinks=True), "sinks"),
        (lambda: DecodeEviction(0), "decode_every must be"),
        (lambda: DecodeEviction(4, rule=0.5), "rule must be"),  # type: ignore[arg-type]
        (lambda: EvictionPolicy(rule=0.5), "rule must be"),  # type: ignore[arg-type]
        (lambda: EvictionPolicy(scorer=None), "scorer must be"),  # type: ignore[arg-type]
    ],
)
def test_bad_policy_pieces_are_refused(make, message) -> None:
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("layer_budget", ["model", "layer"])
def test_a_budget_keeps_the_best_budget_entries_of_the_model_or_of_every_layer(layer_budget) -> None:
    model = kv_model("llama")
    ids, _ = prompt(length=30)
    if layer_budget == "model":
        cache = RCKVCache(model, window=4, budget=10, decode_every=4)
    else:
        policy = EvictionPolicy(TokenBudget(10, scope="layer"), decode=DecodeEviction(every=4))
        cache = RCKVCache(model, window=4, policy=policy)
    model(ids, **cache_argument(model, cache))
    prefill = [state.evictions[0] for state in cache.states.values()]
    per_head = torch.stack([eviction.kept[0].sum(-1) for eviction in prefill])
    assert per_head.unique().numel() > 1  # shared by the heads by score, not 10 each
    if layer_budget == "layer":
        assert per_head.sum(-1).tolist() == [10 * per_head.shape[1]] * per_head.shape[0]
    else:  # shared by the layers too
        assert int(per_head.sum()) == 10 * per_head.numel() and per_head.sum(-1).unique().numel() > 1
    scores = torch.cat([eviction.scores[0, :, 4:26] for eviction in prefill])
    kept = torch.cat([eviction.kept[0, :, 4:26] for eviction in prefill])
    if layer_budget == "model":  # neither sinks nor window: the best of the model are kept
        assert float(scores[kept].min()) >= float(scores[~kept].max())
    for _ in range(8):
        model(torch.randint(3, 120, (1, 1)), **cache_argument(model, cache))
    for evictions in zip(*(state.decode_evictions for state in cache.states.values()), strict=True):
        held = torch.stack([e.held[0].sum(-1) for e in evictions])  # [layers, heads]
        if layer_budget == "layer":
            assert held.sum(-1).tolist() == [10 * held.shape[1]] * held.shape[0]
        else:
            assert int(held.sum()) == 10 * held.numel()
