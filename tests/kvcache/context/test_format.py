"""A cache's saved form (rcattr.kvcache.context.format): every policy rcattr.kvcache offers comes back equal from its
settings, a distilled scorer with its predictor, and a restored cache holds and decides what the saved one did."""

from __future__ import annotations

import json

import pytest
import torch

from rcattr.kvcache import (
    DistilledScorer,
    EvictionPolicy,
    Ratio,
    RCKVCache,
    Threshold,
    TokenBudget,
    WindowScorer,
)
from rcattr.kvcache.context.format import cache_layout, policy_from_settings, policy_settings, restore_cache
from rcattr.kvcache.policy import DecodeEviction
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, prompt, random_predictor

pytestmark = pytest.mark.transformers_line

POLICIES = [
    EvictionPolicy(),
    EvictionPolicy(
        Threshold(1.5, scope="head"), WindowScorer(value_norm=False, sinks=0, dtype=torch.float64)
    ),
    EvictionPolicy(TokenBudget(64, scope="layer"), decode=DecodeEviction(8, Threshold(1.0, scope="layer"))),
    EvictionPolicy(Ratio(0.75), decode=DecodeEviction(16), chunks="every"),
]


def _round_trip(policy: EvictionPolicy) -> EvictionPolicy:
    tensors: dict[str, torch.Tensor] = {}
    settings = json.loads(json.dumps(policy_settings(policy, tensors)))
    return policy_from_settings(settings, tensors)


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
def test_a_policy_comes_back_equal_from_its_settings(policy) -> None:
    assert _round_trip(policy) == policy


def test_a_distilled_scorer_comes_back_with_its_predictor() -> None:
    predictor = random_predictor(kv_model("llama"))
    restored = _round_trip(EvictionPolicy(Ratio(0.5), DistilledScorer(predictor=predictor, sinks=2))).scorer
    assert isinstance(restored, DistilledScorer) and restored.sinks == 2 and restored.predictor is not None
    assert restored.predictor.identity == predictor.identity and restored.predictor.info == predictor.info
    for layer in predictor.layers:
        assert torch.equal(restored.predictor.weights[layer], predictor.weights[layer])
        assert torch.equal(restored.predictor.biases[layer], predictor.biases[layer])


def test_rules_of_ones_own_are_refused() -> None:
    class Mine(Ratio):
        pass

    with pytest.raises(ValueError, match="Mine"):
        policy_settings(EvictionPolicy(Mine(0.5)), {})


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_a_restored_cache_reads_the_next_tokens_as_the_saved_one(arch) -> None:
    model = kv_model(arch)
    ids, mask = prompt(batch=2, length=40, pad=5)
    cache = RCKVCache(model, ratio=0.5, window=4)
    model(ids, attention_mask=mask, **cache_argument(model, cache))
    tensors: dict[str, torch.Tensor] = {}
    layout = json.loads(json.dumps(cache_layout(cache, tensors)))
    restored = restore_cache(model, 4, cache.policy, layout, tensors)
    assert restored.nbytes() == cache.nbytes() and restored.get_seq_length() == cache.get_seq_length()
    token = torch.randint(3, 120, (2, 1))
    mask = torch.cat([mask, torch.ones_like(token)], dim=1)
    positions = mask.sum(-1, keepdim=True) - 1
    logits = [
        model(token, attention_mask=mask, position_ids=positions, **cache_argument(model, c)).logits
        for c in (cache, restored)
    ]
    torch.testing.assert_close(logits[0], logits[1], rtol=0, atol=0)
    with pytest.raises(ValueError, match="layers"):
        restore_cache(model, 4, cache.policy, layout[:-1], tensors)
