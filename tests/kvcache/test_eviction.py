"""Scoring, deciding and applying an eviction (rcattr.kvcache.eviction): the logits after it equal masking exactly
the evicted positions, at the prefill, at later turns and while decoding."""

from __future__ import annotations

import pytest
import torch

from rcattr.kvcache import (
    EvictionPolicy,
    RCKVCache,
    Threshold,
    WindowScorer,
    adaptive_keep,
    window_rc_scores,
)
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, prompt
from tests.reference import evicted_reference_logits, next_logits
from tests.reference.kv import (
    assert_decode_time_eviction_is_exact,
    assert_equals_masking_the_evicted_positions,
)

pytestmark = pytest.mark.transformers_line


@pytest.mark.parametrize(("batch", "pad"), [(1, 0), (2, 5)])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_logits_after_eviction_equal_masking_exactly_the_evicted_positions(arch, attn, batch, pad) -> None:
    model = kv_model(arch, attn)
    ids, mask = prompt(batch=batch, pad=pad)
    chunks = [torch.randint(3, 120, (batch, q)) for q in (3, 1, 1)]
    assert_equals_masking_the_evicted_positions(model, RCKVCache(model, c=1.0, window=4), ids, mask, chunks)


@pytest.mark.parametrize(("batch", "pad"), [(1, 0), (2, 5)])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_later_turn_is_evicted_against_its_own_window_and_earlier_entries_stay(
    arch, attn, batch, pad
) -> None:
    model = kv_model(arch, attn)
    ids, mask = prompt(batch=batch, pad=pad)
    chunks = [
        torch.randint(3, 120, (batch, q)) for q in (1, 2, 24, 1, 1)
    ]  # decode, a short turn, a long turn
    cache = RCKVCache(model, window=4, policy=EvictionPolicy(Threshold(1.0), chunks="every"))
    got = next_logits(model, cache, ids, mask, chunks)
    want = evicted_reference_logits(model, cache, ids, mask, chunks)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-4)
    for index in cache.rc_layers:
        layer = cache.layers[index]
        prefill, short, turn = cache.states[
            index
        ].evictions  # the 2-token turn is all window; 1-token ones are not chunks
        assert [prefill.start, short.start, turn.start] == [0, 41, 43]
        assert short.kept.all() and turn.kept[..., -4:].all() and not turn.kept.all()
        for head, held in enumerate(layer.kept_indices()):  # what the prompt kept is still held
            for row in range(batch):
                earlier = held[row][(held[row] >= 0) & (held[row] < 40)]
                assert earlier.tolist() == prefill.kept[row, head].nonzero().flatten().tolist()
    kept = sum(int(e.kept.sum()) for state in cache.states.values() for e in state.evictions)
    entries = sum(e.prompt_entries for state in cache.states.values() for e in state.evictions)
    assert cache.compression_ratio == pytest.approx(1 - kept / entries)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_what_follows_the_prompt_is_kept_whole_unless_compressing(arch, attn) -> None:
    model = kv_model(arch, attn)
    ids, mask = prompt(batch=2, pad=5)
    question, turn = torch.randint(3, 120, (2, 24)), torch.randint(3, 120, (2, 24))
    cache = RCKVCache(model, c=1.0, window=4)
    got = next_logits(model, cache, ids, mask, [question, torch.randint(3, 120, (2, 1))])
    want = evicted_reference_logits(model, cache, ids, mask, [question, torch.randint(3, 120, (2, 1))])
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=1e-4)  # only the prompt's eviction applies
    assert all(len(state.evictions) == 1 for state in cache.states.values())
    prompt_ratio = cache.compression_ratio
    with cache.compressing() as same:  # a turn that brings a new document
        assert same is cache
        model(turn, **cache_argument(model, cache))
    assert all(len(state.evictions) == 2 for state in cache.states.values())
    assert all(layer.compressing is None for layer in cache.evicting_layers.values())
    assert cache.compression_ratio != prompt_ratio
    every = RCKVCache(model, window=4, policy=EvictionPolicy(Threshold(1.0), chunks="every"))
    model(ids, attention_mask=mask, **cache_argument(model, every))
    with every.compressing(False):
        model(question, **cache_argument(model, every))
    assert all(len(state.evictions) == 1 for state in every.states.values())
    with pytest.raises(ValueError, match="compress must be True or False"), every.compressing(1):  # type: ignore[arg-type]
        pass
    with pytest.raises(ValueError, match="chunks must be 'prompt' or 'every'"):
        EvictionPolicy(chunks="all")  # type: ignore[arg-type]


def test_a_layer_on_random_tensors_keeps_what_its_rule_decides() -> None:
    from rcattr.kvcache import EvictionPolicy, RCLayer, value_weighted
    from rcattr.kvcache.eviction import score_chunk
    from rcattr.runtime.attention import AttentionCall
    from rcattr.runtime.capture import raw_logits

    torch.manual_seed(0)
    batch, kv_heads, heads, n, d, window = 1, 2, 4, 20, 8, 4
    keys, values = torch.randn(batch, kv_heads, n, d), torch.randn(batch, kv_heads, n, d)
    query = torch.randn(batch, heads, n, d)
    rule = Threshold(1.0, "head")
    layer = RCLayer(EvictionPolicy(rule, WindowScorer(sinks=2)), window)
    state = layer.state
    layer.update(keys, values)
    attention = torch.nn.Module()
    attention.layer_idx = 0
    call = AttentionCall(attention, query, keys, values, None, "sdpa")  # plain causality
    scored = score_chunk(layer, call, window, WindowScorer(sinks=2))
    ((keep, threshold),) = rule.decide([scored])
    layer.cut(scored, keep, threshold)
    visible = (torch.arange(n)[None, :] <= torch.arange(n - window, n)[:, None])[None]
    scores = value_weighted(
        window_rc_scores(raw_logits(query[:, :, -window:], keys), visible, kv_heads), values
    )
    keep, _ = adaptive_keep(scores, 1.0)
    keep[..., :2] = True  # the sinks
    expected = torch.cat([keep, torch.ones(batch, kv_heads, window, dtype=torch.bool)], -1)
    assert torch.equal(state.evictions[0].kept, expected)
    for head, held in enumerate(layer.kept_indices()):
        assert held[0].tolist() == expected[0, head].nonzero().flatten().tolist()
        torch.testing.assert_close(layer.keys[0, 0, layer.segments()[head]], keys[0, head, held[0]])
    new_key, new_value = torch.randn(batch, kv_heads, 1, d), torch.randn(batch, kv_heads, 1, d)
    layer.update(new_key, new_value)  # one decoded token: appended to every head, nothing evicted
    assert layer.get_seq_length() == n + 1 and len(state.evictions) == 1
    for head, held in enumerate(layer.kept_indices()):
        assert held[0, -1] == n
        torch.testing.assert_close(layer.values[0, 0, layer.segments()[head]][-1], new_value[0, head, 0])


@pytest.mark.parametrize(("batch", "pad"), [(1, 0), (2, 5)])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("budget", [None, 9])
def test_decode_time_eviction_equals_masking_exactly_the_evicted_positions(
    arch, attn, batch, pad, budget
) -> None:
    assert_decode_time_eviction_is_exact(kv_model(arch, attn), batch, pad, budget)


def test_a_budget_keeps_the_cache_bounded_however_long_the_generation() -> None:
    model = kv_model("llama")
    ids, _ = prompt(length=30)
    cache = RCKVCache(model, window=4, decode_every=4, budget=10)
    sizes = []
    for step in range(40):
        token = ids if step == 0 else torch.randint(3, 120, (1, 1))
        model(token, **cache_argument(model, cache))
        sizes.append(cache.nbytes())
    per_token = cache.layers[cache.rc_layers[0]].slot_nbytes()
    heads, layers = cache.layers[cache.rc_layers[0]].kv_heads, len(cache.rc_layers)
    bound = (
        (10 + 4) * heads * layers * (per_token + 4)
    )  # budget + decode_every tokens per head, positions included
    assert max(sizes[8:]) <= bound
    assert cache.full_nbytes() > 2 * bound


def test_without_a_budget_decode_time_eviction_judges_each_entry_once() -> None:
    model = kv_model("llama")
    ids, _ = prompt(length=30)
    cache = RCKVCache(model, c=1.0, window=4, decode_every=4)
    model(ids, **cache_argument(model, cache))
    for _ in range(24):
        model(torch.randint(3, 120, (1, 1)), **cache_argument(model, cache))
    for state in cache.states.values():
        evictions = state.decode_evictions
        assert [e.seen for e in evictions] == [34, 38, 42, 46, 50, 54]
        prefill = state.evictions[0].kept[0]
        for earlier, later in zip(evictions, evictions[1:], strict=False):
            judged = earlier.seen - 4  # what the earlier one judged stays as it left it
            assert torch.equal(later.held[..., :judged], earlier.held[..., :judged])
        assert torch.equal(evictions[0].held[0, :, :26], prefill[:, :26])  # so does the prefill's choice
        generated = torch.stack([e.held[0, :, e.seen - 8 : e.seen - 4] for e in evictions[1:]])
        assert 0 < int(generated.sum()) < generated.numel()  # the new entries are judged


def test_decode_time_eviction_keeps_the_sinks_and_refuses_bad_settings() -> None:
    model = kv_model("llama")
    ids, _ = prompt()
    cache = RCKVCache(model, c=3.0, window=4, decode_every=2)
    model.generate(ids, max_new_tokens=6, do_sample=False, **cache_argument(model, cache))
    for index in cache.rc_layers:
        for eviction in cache.states[index].decode_evictions:
            assert eviction.held[..., :4].all() and eviction.threshold is not None
    with pytest.raises(ValueError, match="give one of c"):
        RCKVCache(model, budget=100, c=1.0)
    with pytest.raises(ValueError, match="decode_every must be an int"):
        RCKVCache(model, decode_every=0)
    with pytest.raises(ValueError, match="leaves no room"):
        RCKVCache(model, window=16, decode_every=4, budget=20)
