"""Scoring a context against a replay of it (rcattr.kvcache.replay): the cache keeps the context alone, and what
follows reads it exactly as after a plain prefill that evicted the same positions."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from rcattr.eval.kv.scorers import QueryMaxScorer
from rcattr.kvcache import EvictionPolicy, Ratio, RCKVCache
from rcattr.kvcache.replay import replay_prefill
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model

pytestmark = pytest.mark.transformers_line


def _question_logits(model, cache, n: int, question: torch.Tensor) -> torch.Tensor:
    positions = torch.arange(n, n + question.shape[1])[None]
    return model(question, position_ids=positions, **cache_argument(model, cache)).logits


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_replay_that_evicts_nothing_leaves_the_plain_prefill(attn) -> None:
    model = kv_model("llama", attn)
    context, prompt, question = (torch.randint(3, 120, (1, n)) for n in (30, 5, 6))
    cache = RCKVCache(model, window=4, policy=EvictionPolicy(Ratio(0.0), QueryMaxScorer()))
    replay_prefill(model, cache, context, prompt)
    assert cache.get_seq_length() == 30 and cache.compression_ratio == 0.0
    for held in cache.kept_indices:
        assert all(torch.equal(positions, torch.arange(30)[None]) for positions in held)
    plain = DynamicCache(config=model.config)
    model(context, **cache_argument(model, plain))
    torch.testing.assert_close(
        _question_logits(model, cache, 30, question),
        _question_logits(model, plain, 30, question),
        rtol=0,
        atol=1e-4,
    )


def test_a_replay_scores_the_context_against_the_replays_queries_and_cuts_it_by_the_rule() -> None:
    model = kv_model("llama", "sdpa")
    context, prompt = torch.randint(3, 120, (1, 40)), torch.randint(3, 120, (1, 5))
    cache = RCKVCache(model, window=4, policy=EvictionPolicy(Ratio(0.5), QueryMaxScorer(sinks=2)))
    replay_prefill(model, cache, context, prompt)
    assert cache.compression_ratio == pytest.approx(0.5, abs=1 / 40)
    for eviction in cache.evictions:
        assert eviction is not None and eviction.kept.shape[-1] == 40 and eviction.start == 0
        assert eviction.kept[..., :2].all()  # the sinks
        assert torch.isfinite(eviction.scores[..., 2:]).all()  # every other token scored: no window protected
    for held in cache.kept_indices:
        assert all(bool((positions < 40).all()) for positions in held)
    _question_logits(model, cache, 40, torch.randint(3, 120, (1, 6)))  # the question is kept whole
    assert all(len(state.evictions) == 1 for state in cache.states.values())
    for held in cache.kept_indices:
        assert all(set(range(40, 46)) <= set(positions[0].tolist()) for positions in held)


def test_a_replay_is_refused_where_it_cannot_hold() -> None:
    model = kv_model("llama", "sdpa")
    context, prompt = torch.randint(3, 120, (1, 20)), torch.randint(3, 120, (1, 3))
    policy = EvictionPolicy(Ratio(0.5), QueryMaxScorer())
    with pytest.raises(ValueError, match="one row"):
        replay_prefill(model, RCKVCache(model, policy=policy), context.expand(2, -1), prompt)
    with pytest.raises(
        ValueError, match=r"WindowScorer compares every key with the window's own w x w logits"
    ):
        replay_prefill(model, RCKVCache(model, ratio=0.5), context, prompt)
    filled = RCKVCache(model, policy=policy)
    model(context, **cache_argument(model, filled))
    with pytest.raises(RuntimeError, match="already filled"):
        replay_prefill(model, filled, context, prompt)
    with pytest.raises(NotImplementedError, match="sliding-window"):
        replay_prefill(model, RCKVCache(kv_model("gemma3", "sdpa"), policy=policy), context, prompt)
