"""The per-head storage of RCKVCache's layers (rcattr.kvcache.headwise): the positions and bytes it holds,
and what it refuses."""

from __future__ import annotations

import pytest
from transformers import (
    DynamicCache,
)

from rcattr.kvcache import (
    RCKVCache,
)
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
