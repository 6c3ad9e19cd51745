"""The per-head storage of RCKVCache's layers (rcattr.kvcache.headwise): the positions and bytes it holds,
what it refuses, and its attention in one call against one call per key head."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    DynamicCache,
    LlamaConfig,
)
from transformers.models.llama.modeling_llama import LlamaAttention

from rcattr.kvcache import (
    RCKVCache,
)
from rcattr.kvcache.headwise import HeadwiseLayer, _attend_folded, _attend_per_head, _visible_slots
from rcattr.runtime.attention import AttentionCall
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, prompt

pytestmark = pytest.mark.transformers_line


def test_bytes_held_match_the_kept_entries() -> None:
    model = kv_model("gemma3")  # a sliding layer, kept as transformers keeps it, beside a full one
    ids, mask = prompt(batch=2, pad=4)
    cache = RCKVCache(model, c=1.0, window=4)
    model.generate(
        ids, attention_mask=mask, max_new_tokens=3, do_sample=False, **cache_argument(model, cache)
    )
    full = DynamicCache(config=model.config)
    model.generate(ids, attention_mask=mask, max_new_tokens=3, do_sample=False, **cache_argument(model, full))
    held = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v, *_ in full)
    assert cache.full_nbytes() == held

    per_entry = 2 * 32 * 4  # keys and values, head_dim 32, float32
    kept = sum(int(e.kept.sum()) for e in cache.evictions if e is not None)
    generated = 2 * 2 * 2  # 2 new tokens stored (the last one is never fed back) x rows x key heads
    pads = cache.padding_nbytes() // per_entry
    rc_layer = cache.layers[cache.rc_layers[0]]
    assert (kept + generated + pads) * per_entry == rc_layer.keys.numel() * 4 * 2
    slots = rc_layer.positions
    assert int((slots >= 0).sum()) == kept + generated
    sliding = sum(
        layer.keys.numel() * 4 * 2 for i, layer in enumerate(cache.layers) if i not in cache.rc_layers
    )
    assert cache.nbytes() == (kept + generated + pads) * per_entry + slots.numel() * 4 + sliding
    assert cache.nbytes() < cache.full_nbytes()


def test_kept_indices_name_the_stored_positions() -> None:
    model = kv_model("llama")
    ids, _ = prompt(length=30)
    cache = RCKVCache(model, c=1.0, window=4)
    model(ids, **cache_argument(model, cache))
    for indices, eviction in zip(cache.kept_indices, cache.evictions, strict=True):
        for h in range(2):
            assert indices[h][0].tolist() == eviction.kept[0, h].nonzero().flatten().tolist()


def test_cropping_is_refused() -> None:
    model = kv_model("llama")
    cache = RCKVCache(model)
    model(prompt()[0], **cache_argument(model, cache))
    with pytest.raises(NotImplementedError, match="cropped"):
        cache.crop(-2)


def packed_call(
    seed: int, implementation: str, dtype: torch.dtype, q_len: int, masked: bool, pads: bool
) -> tuple[HeadwiseLayer, AttentionCall]:
    """A layer of 3 key heads (6 query heads) that kept uneven random shares of 40 tokens (rows keeping
    different numbers where ``pads``), then stored ``q_len`` new tokens, and the attention call of those
    tokens: left padding in the model's mask where ``masked``, plain causality otherwise."""
    generator = torch.Generator().manual_seed(seed)
    batch, kv_heads, heads, n, dim = 2, 3, 6, 40, 16
    config = LlamaConfig(hidden_size=heads * dim, num_attention_heads=heads, num_key_value_heads=kv_heads)
    module = LlamaAttention(config, layer_idx=0)
    layer = HeadwiseLayer()
    layer.update(*torch.randn(2, batch, kv_heads, n, dim, generator=generator, dtype=dtype))
    rows = batch if pads else 1
    shares = torch.rand(kv_heads, rows, n, generator=generator) < torch.rand(
        kv_heads, 1, 1, generator=generator
    )
    keeps = [(share | (torch.arange(n) == n - 1)).expand(batch, n).clone() for share in shares]
    if pads:
        keeps[0][1] = False  # row 1 of head 0 keeps nothing: its old segment is all pads
    layer.keep_slots(keeps)
    keys, values = layer.update(
        *torch.randn(2, batch, kv_heads, q_len, dim, generator=generator, dtype=dtype)
    )
    query = torch.randn(batch, q_len, heads, dim, generator=generator, dtype=dtype).transpose(1, 2)
    mask = None
    if masked:
        positions = torch.arange(layer.seen)
        allowed = (positions <= positions[-q_len:, None]) & (positions >= torch.tensor([0, 7])[:, None, None])
        mask = allowed[:, None]
        if implementation == "eager":
            mask = torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)
    options = {"dropout": 0.0, "scaling": 0.3}  # as the model passes them; not head_dim ** -0.5
    call = AttentionCall(module, query, keys, values, mask, implementation, kwargs=options)
    return layer, call.starting_at(layer.seen - q_len)


@pytest.mark.parametrize("pads", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_one_query_folded_into_one_head_per_key_head_attends_as_the_model_s_kernel(
    implementation, dtype, masked, pads
) -> None:
    # the eager kernel takes its softmax in float32 whatever the dtype; the folded call runs torch's sdpa
    tolerance = {"rtol": 1.3e-6, "atol": 1e-5} if implementation == "eager" else {}
    for seed in range(3):
        layer, call = packed_call(seed, implementation, dtype, 1, masked, pads)
        assert layer.packed and layer.has_pads == pads and len(set(layer.head_slots or [])) > 1
        want = _attend_per_head(layer, call, _visible_slots(layer, call))
        torch.testing.assert_close(
            _attend_folded(layer, call, _visible_slots(layer, call)), want, **tolerance
        )
        torch.testing.assert_close(layer.attend(call), want, **tolerance)
