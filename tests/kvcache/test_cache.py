"""RCKVCache itself (rcattr.kvcache.cache): generation as the default cache gives it, compression, copies, errors."""

from __future__ import annotations

import gc

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    DynamicCache,
    MistralConfig,
    T5Config,
    T5ForConditionalGeneration,
)

from rcattr.kvcache import (
    DecodeEviction,
    EvictionPolicy,
    Ratio,
    RCKVCache,
    Threshold,
    WindowScorer,
)
from rcattr.runtime.compat import cache_argument
from tests.helpers import char_tokenizer, kv_model, prompt, tiny_configs, tiny_model

pytestmark = pytest.mark.transformers_line


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_c_zero_generates_exactly_like_the_default_cache(arch, attn) -> None:
    model = kv_model(arch, attn)
    ids, mask = prompt(batch=2, pad=6)
    default = model.generate(ids, attention_mask=mask, max_new_tokens=10, do_sample=False)
    cache = RCKVCache(model, c=0.0, window=4)
    kept_all = model.generate(
        ids, attention_mask=mask, max_new_tokens=10, do_sample=False, **cache_argument(model, cache)
    )
    assert torch.equal(default, kept_all)
    assert cache.compression_ratio == 0.0


def test_eviction_leaves_other_caches_untouched() -> None:
    model = kv_model("llama")
    ids, _ = prompt()
    before = model(ids).logits
    model.generate(
        ids, max_new_tokens=4, do_sample=False, **cache_argument(model, RCKVCache(model, c=1.5, window=4))
    )
    torch.testing.assert_close(model(ids).logits, before, rtol=0, atol=0)
    torch.testing.assert_close(
        model(ids, **cache_argument(model, DynamicCache(config=model.config))).logits, before
    )


def test_window_is_kept_and_evictions_are_per_head() -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2, pad=3)
    cache = RCKVCache(model, c=1.0, window=6)
    model(ids, attention_mask=mask, **cache_argument(model, cache))
    for eviction in cache.evictions:
        assert eviction is not None
        assert eviction.kept[..., -6:].all()
        assert not eviction.kept[1, :, :3].any()  # padding is never kept
        assert torch.isinf(eviction.scores[..., -6:]).all()
    real_entries = (40 + 37) * 2  # rows of 40 and 40 - 3 real tokens, 2 key heads
    kept = [int(e.kept.sum()) for e in cache.evictions]
    torch.testing.assert_close(
        cache.layer_compression_ratio, torch.tensor([1 - k / real_entries for k in kept]), rtol=0, atol=1e-6
    )
    assert cache.compression_ratio == pytest.approx(1 - sum(kept) / (3 * real_entries))
    per_head = cache.head_compression_ratio
    assert per_head.shape == (3, 2, 2)
    assert per_head.unique().numel() > 1  # budgets differ across heads and layers


@pytest.mark.parametrize("window", [5, 16, 1000])
@pytest.mark.parametrize(
    "policy",
    [
        EvictionPolicy(Threshold(1.0)),
        EvictionPolicy(Threshold(1.0, "head")),
        EvictionPolicy(Ratio(0.5)),
        EvictionPolicy(Ratio(0.5, "head")),
        EvictionPolicy(scorer=WindowScorer(sinks=0)),
    ],
)
@pytest.mark.parametrize(("batch", "pad"), [(1, 0), (2, 2)])
def test_a_prompt_no_longer_than_the_window_is_kept_whole(window, policy, batch, pad) -> None:
    model = kv_model("gemma3")
    ids, mask = prompt(batch=batch, length=5, pad=pad)
    cache = RCKVCache(model, window=window, policy=policy)
    out = model.generate(
        ids, attention_mask=mask, max_new_tokens=3, do_sample=False, **cache_argument(model, cache)
    )
    assert out.shape == (batch, 8) and cache.compression_ratio == 0.0


def test_compression_grows_with_c() -> None:
    model = kv_model("qwen3")
    ids, _ = prompt(length=64)
    ratios = []
    for c in [0.0, 0.5, 1.0, 1.5, 2.0, 4.0]:
        cache = RCKVCache(model, c=c, window=8)
        model(ids, **cache_argument(model, cache))
        ratios.append(cache.compression_ratio)
    assert ratios == sorted(ratios)
    assert ratios[0] == 0.0 and ratios[-1] > ratios[2] > 0.0


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_beam_search_through_c_zero_equals_the_default_caches_beams(arch) -> None:
    model = kv_model(arch)
    ids, mask = prompt(batch=2, pad=5)
    options = {"max_new_tokens": 6, "num_beams": 3, "num_return_sequences": 3, "do_sample": False}
    options |= {"output_scores": True, "return_dict_in_generate": True}
    default = model.generate(ids, attention_mask=mask, **options)
    kept_all = model.generate(
        ids, attention_mask=mask, **cache_argument(model, RCKVCache(model, c=0.0)), **options
    )
    assert torch.equal(default.sequences, kept_all.sequences)
    torch.testing.assert_close(default.sequences_scores, kept_all.sequences_scores)
    compressed = model.generate(
        ids, attention_mask=mask, **cache_argument(model, RCKVCache(model, window=4)), **options
    )
    assert compressed.sequences.shape == default.sequences.shape


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"c": -1.0}, "c must be"),
        ({"c": float("nan")}, "c must be"),
        ({"window": 0}, "window must be"),
        ({"budget": 0}, "budget must be"),
        ({"c": 1.0, "budget": 100}, "give one of c"),
        ({"c": 1.0, "ratio": 0.5}, r"give one of c .*: c=1.0, ratio=0.5"),
        ({"ratio": 0.5, "budget": 100}, r"give one of c .*: ratio=0.5, budget=100"),
        ({"ratio": 1.0}, r"ratio must be in \[0, 1\)"),
        ({"ratio": -0.1}, r"ratio must be in \[0, 1\)"),
        ({"ratio": True}, r"ratio must be in \[0, 1\)"),
        ({"ratio": 0.5, "policy": EvictionPolicy()}, r"give policy alone .*: ratio=0.5"),
        ({"c": 1.0, "policy": EvictionPolicy()}, r"give policy alone .*: c=1.0"),
        ({"decode_every": 4, "policy": EvictionPolicy()}, r"give policy alone .*: decode_every=4"),
        ({"policy": Threshold(1.0)}, "policy must be an EvictionPolicy"),
    ],
)
def test_bad_settings_are_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        RCKVCache(kv_model("llama"), **kwargs)


@pytest.mark.parametrize("decode_every", [None, 3])
def test_the_default_evicts_half_of_the_prompt_by_the_window_score(decode_every) -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2, pad=3)
    default = RCKVCache(model, window=4, decode_every=decode_every)
    decode = None if decode_every is None else DecodeEviction(decode_every)
    assert default.policy == EvictionPolicy(Ratio(0.5, "model"), WindowScorer(), decode)
    assert default.policy == RCKVCache(model, ratio=0.5, window=4, decode_every=decode_every).policy
    assert RCKVCache(model, policy=EvictionPolicy()).policy == EvictionPolicy(Ratio(0.5))
    model(ids, attention_mask=mask, **cache_argument(model, default))
    assert default.compression_ratio == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize("decode_every", [None, 3])
def test_ratio_is_the_ratio_rule_over_the_model(decode_every) -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2, pad=3)
    by_word = RCKVCache(model, ratio=0.5, window=4, decode_every=decode_every)
    decode = None if decode_every is None else DecodeEviction(decode_every)
    composed = RCKVCache(model, window=4, policy=EvictionPolicy(Ratio(0.5), decode=decode))
    assert by_word.policy == composed.policy
    for cache in (by_word, composed):
        model.generate(
            ids, attention_mask=mask, max_new_tokens=7, do_sample=False, **cache_argument(model, cache)
        )
    for index in by_word.rc_layers:
        for mine, theirs in zip(by_word.kept_indices[index], composed.kept_indices[index], strict=True):
            assert torch.equal(mine, theirs)
    assert by_word.compression_ratio == composed.compression_ratio > 0


def test_right_padding_is_refused() -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2)
    mask[-1, -3:] = 0
    with pytest.raises(ValueError, match="left padding"):
        model(ids, attention_mask=mask, **cache_argument(model, RCKVCache(model)))


def test_unsupported_models_are_refused() -> None:
    t5 = T5ForConditionalGeneration(
        T5Config(vocab_size=32, d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8)
    )
    with pytest.raises(NotImplementedError, match="encoder-decoder"):
        RCKVCache(t5)
    sliding = AutoModelForCausalLM.from_config(
        MistralConfig(**{**tiny_configs()["mistral"].to_dict(), "sliding_window": 5}),
        attn_implementation="sdpa",
    )
    with pytest.raises(NotImplementedError, match="sliding-window"):
        RCKVCache(sliding)
    model = kv_model("llama")
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(NotImplementedError, match="attn_implementation"):
        RCKVCache(model)
    with pytest.raises(TypeError, match="model must be a transformers model .*, got TokenizersBackend"):
        RCKVCache(char_tokenizer())  # type: ignore[arg-type]


def test_bfloat16_models_are_compressed() -> None:
    model = tiny_model("qwen3", dtype=torch.bfloat16)
    ids, mask = prompt(batch=2, pad=4)
    default = model.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False)
    kept_all = model.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=6,
        do_sample=False,
        **cache_argument(model, RCKVCache(model, c=0.0)),
    )
    assert torch.equal(default, kept_all)
    cache = RCKVCache(model, c=1.0, window=4)
    model.generate(
        ids, attention_mask=mask, max_new_tokens=6, do_sample=False, **cache_argument(model, cache)
    )
    assert cache.compression_ratio > 0.2
    assert cache.layers[0].keys.dtype == torch.bfloat16


def test_assisted_decoding_is_refused_before_any_work() -> None:
    model, assistant = kv_model("llama"), kv_model("llama")
    cache = RCKVCache(model)
    with pytest.raises(NotImplementedError, match="assisted or speculative decoding"):
        model.generate(
            prompt()[0], assistant_model=assistant, **cache_argument(model, cache), max_new_tokens=4
        )
    if hasattr(DynamicCache, "activate_past_recording"):  # transformers asks for it first since 5.3
        assert cache.get_seq_length() == 0


@torch.no_grad()
def test_a_deep_copy_is_open_on_the_same_model_until_closed() -> None:
    """A compressed prompt continued twice (as the KV benchmark does): the copy holds the same entries, goes
    on exactly like the original, and each closes on its own."""
    import copy

    from rcattr.runtime.compat import registered_attention

    gc.collect()
    model = kv_model("llama")
    before = registered_attention()
    ids, mask = prompt(batch=2, pad=5)
    chunk = torch.randint(3, 120, (2, 1))
    cache = RCKVCache(model, window=4)
    model(ids, attention_mask=mask, **cache_argument(model, cache))
    twin = copy.deepcopy(cache)
    assert twin.compression_ratio == cache.compression_ratio > 0
    longer = torch.cat([mask, torch.ones_like(chunk)], -1)
    original = model(chunk, attention_mask=longer, **cache_argument(model, cache)).logits
    cache.close()
    copied = model(chunk, attention_mask=longer, **cache_argument(model, twin)).logits  # still open
    torch.testing.assert_close(copied, original, rtol=0, atol=0)
    twin.close()
    assert model.config._attn_implementation == "sdpa" and registered_attention() == before
    with pytest.raises(RuntimeError, match="closed"):
        copy.deepcopy(twin)
