"""RCKVCache's hook in the model's attention (rcattr.kvcache.hook): paired with its own model only, and
leaving the attention functions as they were."""

from __future__ import annotations

import gc

import pytest
import torch

from rcattr.kvcache import (
    RCKVCache,
)
from rcattr.runtime.capture import LogitCapture, LogitStore
from rcattr.runtime.compat import cache_argument
from tests.helpers import kv_model, prompt

pytestmark = pytest.mark.transformers_line


def test_a_cache_used_by_another_model_is_refused() -> None:
    model, other = kv_model("llama"), kv_model("llama")
    ids, _ = prompt()
    cache = RCKVCache(model)
    with pytest.raises(RuntimeError, match="other than the one this RCKVCache was created for"):
        # the other model's attention is not routed through RCKVCache
        other(ids, **cache_argument(other, cache))
    held = RCKVCache(other)  # now it is, for as long as one of its own caches is open  # noqa: F841
    with pytest.raises(RuntimeError, match="other than the one this RCKVCache was created for"):
        other(ids, **cache_argument(other, RCKVCache(model)))
    own = RCKVCache(model)
    # its own model still works
    model.generate(ids, max_new_tokens=2, **cache_argument(model, own), do_sample=False)
    assert own.compression_ratio > 0


def test_logit_capture_still_works_once_installed() -> None:
    model = kv_model("llama")
    RCKVCache(model)
    store = LogitStore()
    ids, _ = prompt(length=12)
    with LogitCapture(model, store, query_positions=slice(10, None)):
        model(ids)
    assert store.layer(0)[0].shape == (1, 4, 2, 12)


def test_wrappers_accept_dropout_by_position_as_kvpress_patches_them(monkeypatch) -> None:
    """Importing kvpress wraps every registered attention function in one that passes ``dropout`` by
    position: RCKVCache's and LogitCapture's wrappers must forward it and stay exact."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    model = kv_model("llama")
    ids, mask = prompt(length=24)

    def generated_and_captured() -> tuple[torch.Tensor, torch.Tensor]:
        cache = RCKVCache(model, window=4)
        tokens = model.generate(
            ids, attention_mask=mask, **cache_argument(model, cache), max_new_tokens=4, do_sample=False
        )
        store = LogitStore()
        with LogitCapture(model, store, query_positions=slice(20, None)):
            model(ids)
        return tokens, store.layer(0)[0]

    expected_tokens, expected_logits = generated_and_captured()

    def positional_dropout(function):
        def patched(module, query, key, value, attention_mask, dropout, **kwargs):
            return function(module, query, key, value, attention_mask, dropout, **kwargs)

        return patched

    for name in ALL_ATTENTION_FUNCTIONS.valid_keys():
        monkeypatch.setitem(
            ALL_ATTENTION_FUNCTIONS._local_mapping, name, positional_dropout(ALL_ATTENTION_FUNCTIONS[name])
        )
    tokens, logits = generated_and_captured()
    assert torch.equal(tokens, expected_tokens)
    torch.testing.assert_close(logits, expected_logits, equal_nan=True)


def test_a_cache_bypassed_by_a_later_attention_switch_is_refused() -> None:
    model = kv_model("llama")
    cache = RCKVCache(model)
    model.set_attn_implementation("eager")
    with pytest.raises(RuntimeError, match="bypasses RCKVCache"):
        model(prompt()[0], **cache_argument(model, cache))


def test_a_closed_cache_leaves_the_model_and_transformers_as_they_were() -> None:
    from rcattr.runtime.compat import registered_attention

    gc.collect()  # caches other tests left behind give their models back first
    model = kv_model("llama")
    ids, _ = prompt()
    before, implementation = registered_attention(), model.config._attn_implementation
    reference = model(ids).logits
    with RCKVCache(model, window=4) as cache:
        assert model.config._attn_implementation != implementation
        other = RCKVCache(model)  # a second open cache of the same model shares the route
        model.generate(ids, max_new_tokens=3, do_sample=False, **cache_argument(model, cache))
        other.close()
        assert model.config._attn_implementation != implementation  # ``cache`` is still open
        with LogitCapture(model, LogitStore()):  # a capture on top, closed first
            model(ids)
    assert model.config._attn_implementation == implementation
    assert registered_attention() == before
    torch.testing.assert_close(model(ids).logits, reference, rtol=0, atol=0)
    dropped = RCKVCache(model)
    del dropped  # a cache nobody holds gives the model back too, once collected
    gc.collect()
    assert model.config._attn_implementation == implementation and registered_attention() == before


@pytest.mark.parametrize("budget", [None, 10])
def test_a_dropped_cache_is_freed_without_the_garbage_collector(budget) -> None:
    """Neither the layers nor the model's hook refer back to the cache: dropping the last reference frees it
    (and gives the model its attention back) at once, with the cross-layer decisions done."""
    import weakref

    from rcattr.runtime.compat import registered_attention

    gc.collect()  # caches other tests left behind give their models back first
    model = kv_model("llama")
    before = registered_attention()
    threshold = {"c": 1.0} if budget is None else {"budget": budget}
    gc.disable()
    try:
        cache = RCKVCache(model, window=4, decode_every=2, **threshold)
        model.generate(
            prompt(length=30)[0], max_new_tokens=5, do_sample=False, **cache_argument(model, cache)
        )
        dropped = weakref.ref(cache)
        del cache
        assert dropped() is None
        assert model.config._attn_implementation == "sdpa" and registered_attention() == before
    finally:
        gc.enable()
