"""The evicting layer (rcattr.kvcache.layer): it owns its state, which follows the batch, and resets with it."""

from __future__ import annotations

import pytest
import torch

from rcattr.kvcache import DecodeEviction, EvictionPolicy, RCKVCache, RCLayer, TokenBudget
from rcattr.kvcache.scored import ChunkScores, DecodeScores
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, prompt

pytestmark = pytest.mark.transformers_line


def test_each_evicting_layer_owns_its_state_and_the_cache_only_reads_it() -> None:
    model = kv_model("gemma3")  # layers 0 and 2 slide: transformers' own layers, not RCLayer
    cache = RCKVCache(model, window=4, decode_every=3)
    assert [type(layer) is RCLayer for layer in cache.layers] == [False, True, False]
    model(prompt()[0], **cache_argument(model, cache))
    layer = cache.layers[1]
    assert isinstance(layer, RCLayer) and cache.states == {1: layer.state}
    assert layer.state.prefilled and cache.evictions == [None, layer.state.evictions[0], None]
    assert "states" not in vars(cache) and "_evicting" not in vars(cache)


def test_beam_search_reorders_each_layers_state_with_its_entries() -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2, pad=3)
    policy = EvictionPolicy(TokenBudget(20), decode=DecodeEviction(3))
    cache = RCKVCache(model, window=4, policy=policy)
    model.generate(
        ids,
        attention_mask=mask,
        **cache_argument(model, cache),
        max_new_tokens=7,
        num_beams=3,
        do_sample=False,
    )
    for layer in cache.evicting_layers.values():
        assert layer.state.recent.shape[0] == 6  # 2 rows x 3 beams, as the layer's entries
        assert layer.keys.shape[0] == 6 and len(layer.state.decode_evictions) == 2
    picked = torch.tensor([5, 0])
    layer = cache.layers[0]
    recent = layer.state.recent.clone()
    cache.batch_select_indices(picked)
    assert torch.equal(layer.state.recent, recent[picked]) and layer.keys.shape[0] == 2


def test_a_reset_cache_decides_as_a_new_one() -> None:
    model = kv_model("llama")
    ids, _ = prompt(length=30)
    cache = RCKVCache(model, budget=12, window=4)
    model(prompt(length=20)[0], **cache_argument(model, cache))
    cache.reset()
    assert all(not state.prefilled for state in cache.states.values())
    model(ids, **cache_argument(model, cache))
    fresh = RCKVCache(model, budget=12, window=4)
    model(ids, **cache_argument(model, fresh))
    for ours, theirs in zip(cache.evictions, fresh.evictions, strict=True):
        assert torch.equal(ours.kept, theirs.kept)


def filled_layer(n: int = 6, kv_heads: int = 2) -> RCLayer:
    layer = RCLayer(EvictionPolicy(), window=2)
    torch.manual_seed(0)
    layer.update(torch.randn(1, kv_heads, n, 4), torch.randn(1, kv_heads, n, 4))
    return layer


def test_a_chunk_s_cut_keeps_its_window_and_is_recorded() -> None:
    layer = filled_layer()
    window = 2  # the last two tokens: kept whatever the decision
    scores = torch.arange(8, dtype=torch.float).view(1, 8)  # 4 candidates per key head
    scored = ChunkScores(
        scores, torch.zeros(1, 8, dtype=torch.bool), [4, 4], window, torch.ones(1, 6, dtype=torch.bool), 0
    )
    keep = torch.tensor([[True, False, False, True, False, True, True, False]])
    layer.cut(scored, keep, None)
    assert [positions.tolist() for positions in layer.kept_indices()] == [[[0, 3, 4, 5]], [[1, 2, 4, 5]]]
    (eviction,) = layer.state.evictions
    assert eviction.kept.tolist() == [
        [[True, False, False, True, True, True], [False, True, True, False, True, True]]
    ]
    assert layer.state.judged_until == layer.seen - window and eviction.threshold is None


def test_a_decode_time_cut_records_what_each_head_holds() -> None:
    layer = filled_layer(n=4)
    state = layer.state
    state.recent = torch.zeros(1, 2, 1, 4)  # one recent query
    keep = torch.tensor([[True, True, False, True, False, True, True, True]])
    layer.cut(DecodeScores(torch.zeros(1, 8), torch.zeros(1, 8, dtype=torch.bool), [4, 4], 0), keep, None)
    (record,) = state.decode_evictions
    assert record.held.tolist() == [[[True, True, False, True], [False, True, True, True]]]
    assert state.decoded == 0 and state.judged_until == 3


def test_forgetting_after_the_context_is_a_step_of_its_own() -> None:
    layer = filled_layer(n=6)
    layer.forget_after(4)
    assert (
        layer.seen == 4 and [positions.tolist() for positions in layer.kept_indices()] == [[[0, 1, 2, 3]]] * 2
    )
