"""Chunked prefill (rcattr.kvcache.prefill): a plain cache fills exactly as in one forward; an RCKVCache compresses
every chunk before the next arrives, so that it never holds more than what it kept plus one chunk."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from rcattr.kvcache import RCKVCache, chunked_prefill
from rcattr.kvcache.layer import RCLayer
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, prompt

pytestmark = pytest.mark.transformers_line


def _one_forward(model, ids, mask=None) -> tuple[DynamicCache, torch.Tensor]:
    cache = DynamicCache(config=model.config)
    positions = None if mask is None else (mask.cumsum(-1) - 1).clamp_min(0)  # as generate gives them
    logits = model(ids, attention_mask=mask, position_ids=positions, **cache_argument(model, cache)).logits
    return cache, logits[:, -1]


def _next_logits(model, cache, mask: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    mask = torch.cat([mask, torch.ones_like(token)], dim=1)
    positions = mask.sum(-1, keepdim=True) - 1
    return model(token, attention_mask=mask, position_ids=positions, **cache_argument(model, cache)).logits[
        :, -1
    ]


def _assert_next_token_reads_the_same(model, cache, want_cache, mask: torch.Tensor) -> None:
    token = torch.randint(3, 120, (mask.shape[0], 1))
    torch.testing.assert_close(
        _next_logits(model, cache, mask, token),
        _next_logits(model, want_cache, mask, token),
        rtol=0,
        atol=1e-4,
    )


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_plain_cache_fills_as_in_one_forward(arch, attn) -> None:
    model = kv_model(arch, attn)
    ids, mask = prompt(batch=2, length=37, pad=6)
    want_cache, want = _one_forward(model, ids, mask)
    cache = DynamicCache(config=model.config)
    got = chunked_prefill(model, cache, ids, chunk_size=8, attention_mask=mask)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-4)
    assert cache.get_seq_length() == 37
    _assert_next_token_reads_the_same(model, cache, want_cache, mask)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_an_rc_cache_that_keeps_everything_reads_as_one_forward(arch, attn) -> None:
    model = kv_model(arch, attn)
    ids, mask = prompt(batch=2, length=41, pad=5)
    want_cache, want = _one_forward(model, ids, mask)
    cache = RCKVCache(model, c=0.0, window=4)
    got = chunked_prefill(model, cache, ids, chunk_size=9, attention_mask=mask)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-4)
    starts = [eviction.start for eviction in next(iter(cache.states.values())).evictions]
    assert starts == [0, 14, 23, 32]  # the first chunk holds the 5 pads and 9 tokens
    assert cache.compression_ratio == 0.0
    _assert_next_token_reads_the_same(model, cache, want_cache, mask)


@pytest.mark.parametrize("chunk", [10, 17, 25])  # each chunk longer than twice the window it keeps
def test_each_chunk_is_cut_before_the_next_arrives(chunk) -> None:
    model = kv_model("llama")
    ids = torch.randint(3, 120, (1, 60))
    cache = RCKVCache(model, ratio=0.5, window=4)
    layers = cache.evicting_layers
    held: list[tuple[int, int, int]] = []  # (layer, entries held after the update, tokens seen)
    update = RCLayer.update

    def counting(layer, *args, **kwargs):
        out = update(layer, *args, **kwargs)
        held.append(
            (id(layer), sum(int((positions >= 0).sum()) for *_, positions in layer.held()), layer.seen)
        )
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RCLayer, "update", counting)
        chunked_prefill(model, cache, ids, chunk_size=chunk)
    chunks = -(-60 // chunk)
    for layer in layers.values():
        evictions = layer.state.evictions
        assert [e.start for e in evictions] == list(range(0, 60, chunk))
        kept = [0, *(int(e.kept.sum()) for e in evictions)]
        # when a chunk arrives, the layer holds what the earlier chunks kept and the chunk itself, no more
        mine = [(entries, seen) for owner, entries, seen in held if owner == id(layer)]
        assert len(mine) == chunks
        for k, (entries, seen) in enumerate(mine):
            assert entries == sum(kept[: k + 1]) + layer.kv_heads * (seen - evictions[k].start)
    # the ratio holds chunk by chunk, over every key head of every layer
    for k in range(chunks):
        chunk_kept = sum(int(layer.state.evictions[k].kept.sum()) for layer in layers.values())
        chunk_entries = sum(layer.state.evictions[k].prompt_entries for layer in layers.values())
        assert chunk_kept == int(chunk_entries * 0.5)
    assert cache.compression_ratio == pytest.approx(0.5, abs=0.01)


def test_generate_chunks_the_prompt_the_same_way_inside_compressing() -> None:
    model = kv_model("llama")
    ids = torch.randint(3, 120, (1, 45))
    cache = RCKVCache(model, ratio=0.5, window=4)
    with cache.compressing():
        model.generate(
            ids, **cache_argument(model, cache), max_new_tokens=3, do_sample=False, prefill_chunk_size=10
        )
    evictions = next(iter(cache.states.values())).evictions
    assert [e.start for e in evictions] == list(range(0, 45, 10))
    prefilled = (
        evictions[-1].start + evictions[-1].present.shape[-1]
    )  # 44 on transformers 5.2: its last token decodes
    same = RCKVCache(model, ratio=0.5, window=4)
    chunked_prefill(model, same, ids[:, :prefilled], chunk_size=10)
    for layer, reference in zip(cache.evicting_layers.values(), same.evicting_layers.values(), strict=True):
        for got, want in zip(layer.kept_indices(), reference.kept_indices(), strict=True):
            assert torch.equal(got[got < prefilled], want[want >= 0])


def test_bad_input_is_refused_by_name() -> None:
    model = kv_model("llama")
    ids = torch.randint(3, 120, (1, 12))
    cache = RCKVCache(model, ratio=0.5, window=4)
    for size in (0, True, 2.0):
        with pytest.raises(ValueError, match="chunk_size must be an int >= 1"):
            chunked_prefill(model, cache, ids, chunk_size=size)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"input_ids must be \[batch, n\]"):
        chunked_prefill(model, cache, ids[0])
    with pytest.raises(ValueError, match=r"input_ids must be \[batch, n\]"):
        chunked_prefill(model, cache, ids[:, :0])
    with pytest.raises(ValueError, match="do not fit in LlamaForCausalLM's window of 256"):
        chunked_prefill(model, cache, torch.randint(3, 120, (1, 257)))
    with pytest.raises(ValueError, match="attention_mask must be"):
        chunked_prefill(model, cache, ids, attention_mask=torch.ones(1, 11))
    with pytest.raises(ValueError, match="TokenBudget bounds the whole cache"):
        chunked_prefill(model, RCKVCache(model, budget=16, window=4), ids)
    assert cache.get_seq_length() == 0
