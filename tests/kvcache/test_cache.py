"""RCKVCache on tiny random models: scores against brute force, exactness after eviction, accounting, errors."""

from __future__ import annotations

import gc

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import (
    AutoModelForCausalLM,
    DynamicCache,
    MistralConfig,
    T5Config,
    T5ForConditionalGeneration,
)

from rcattr.capture import LogitCapture, LogitStore
from rcattr.kvcache import (
    DecodeEviction,
    EvictionPolicy,
    Ratio,
    RCKVCache,
    Threshold,
    TokenBudget,
    WindowScorer,
    adaptive_keep,
    budget_keep,
    cache_argument,
    fixed_ratio_keep,
    leading_tokens,
    window_rc_scores,
)
from tests.helpers import char_tokenizer, kv_model, prompt, tiny_configs, tiny_model
from tests.helpers.blocks import random_window
from tests.reference import evicted_reference_logits, next_logits
from tests.reference.kv import (
    assert_decode_time_eviction_is_exact,
    assert_equals_masking_the_evicted_positions,
    brute_scores,
)

# ---------------------------------------------------------------------------------------------
# the scores and the decision, against brute force
# ---------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    window=st.integers(1, 5),
    context=st.integers(1, 7),
    pad=st.integers(0, 4),
    kv_heads=st.sampled_from([1, 2]),
)
def test_window_scores_equal_brute_force(seed, window, context, pad, kv_heads) -> None:
    logits, visible = random_window(seed, window, context, pad)
    got = window_rc_scores(logits, visible, kv_heads, dtype=torch.float64)
    want = brute_scores(logits, visible, kv_heads, "mean")
    torch.testing.assert_close(got, want, equal_nan=True)
    scorer = WindowScorer(value_norm=False, dtype=torch.float64)
    values = torch.ones(2, kv_heads, logits.shape[-1], 3, dtype=torch.float64)
    torch.testing.assert_close(scorer(logits, visible, values), want, equal_nan=True)


def test_adaptive_keep_threshold_is_c_times_mean() -> None:
    scores = torch.tensor([[[0.0, 1.0, 2.0, 5.0, float("nan")]]])
    keep, threshold = adaptive_keep(scores, 1.0)
    assert threshold.item() == pytest.approx(2.0)
    assert keep.tolist() == [[[False, False, True, True, False]]]
    keep0, _ = adaptive_keep(scores, 0.0)
    assert keep0.tolist() == [[[True, True, True, True, False]]]  # c = 0 keeps every real token


def test_fixed_ratio_keeps_the_best_of_every_head() -> None:
    scores = torch.tensor([[[3.0, 1.0, 2.0, 0.0, 5.0, 4.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]])
    keep = fixed_ratio_keep(scores, ratio=0.5, window=2)  # 8 prompt tokens -> 4 kept, 2 of them the window
    assert keep.tolist() == [
        [[False, False, False, False, True, True], [False, False, False, False, True, True]]
    ]


def test_leading_tokens_skip_left_padding() -> None:
    present = torch.tensor([[True] * 6, [False, False, True, True, True, True]])
    assert leading_tokens(present, 2).tolist() == [
        [True, True, False, False, False, False],
        [False, False, True, True, False, False],
    ]
    assert not leading_tokens(present, 0).any()


def test_protected_keys_are_kept_and_count_in_the_budget() -> None:
    scores = torch.tensor([[[0.0, 1.0, 2.0, 5.0, 4.0, 3.0]]])
    protected = torch.tensor([[[True, False, False, False, False, False]]])
    keep, threshold = Threshold(1.0).keep(scores, protected, 2, 1)
    assert threshold.item() == pytest.approx(2.5)  # the sink's score still counts in the mean
    assert keep.tolist() == [[[True, False, False, True, True, True]]]
    keep, _ = Ratio(0.5).keep(scores, protected, 2, 1)  # 8 tokens -> 4 kept, 2 of them window
    assert keep.tolist() == [[[True, False, False, True, False, False]]]


# ---------------------------------------------------------------------------------------------
# generate with the cache
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_c_zero_generates_exactly_like_the_default_cache(arch, attn) -> None:
    model = kv_model(arch, attn)
    ids, mask = prompt(batch=2, pad=6)
    default = model.generate(ids, attention_mask=mask, max_new_tokens=10, do_sample=False)
    cache = RCKVCache(model, c=0.0, window=4)
    kept_all = model.generate(
        ids, attention_mask=mask, max_new_tokens=10, do_sample=False, past_key_values=cache
    )
    assert torch.equal(default, kept_all)
    assert cache.compression_ratio == 0.0


def test_eviction_leaves_other_caches_untouched() -> None:
    model = kv_model("llama")
    ids, _ = prompt()
    before = model(ids).logits
    model.generate(ids, max_new_tokens=4, do_sample=False, past_key_values=RCKVCache(model, c=1.5, window=4))
    torch.testing.assert_close(model(ids).logits, before, rtol=0, atol=0)
    torch.testing.assert_close(model(ids, past_key_values=DynamicCache(config=model.config)).logits, before)


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
    cache = RCKVCache(model, c=1.0, window=4)
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


def test_a_cache_used_by_another_model_is_refused() -> None:
    model, other = kv_model("llama"), kv_model("llama")
    ids, _ = prompt()
    cache = RCKVCache(model)
    with pytest.raises(RuntimeError, match="other than the one this RCKVCache was created for"):
        other(ids, past_key_values=cache)  # the other model's attention is not routed through RCKVCache
    held = RCKVCache(other)  # now it is, for as long as one of its own caches is open  # noqa: F841
    with pytest.raises(RuntimeError, match="other than the one this RCKVCache was created for"):
        other(ids, past_key_values=RCKVCache(model))
    own = RCKVCache(model)
    model.generate(ids, max_new_tokens=2, past_key_values=own, do_sample=False)  # its own model still works
    assert own.compression_ratio > 0


def test_window_is_kept_and_evictions_are_per_head() -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2, pad=3)
    cache = RCKVCache(model, c=1.0, window=6)
    model(ids, attention_mask=mask, past_key_values=cache)
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


POLICIES = {  # changes to the default (one threshold over the model, value norms, 4 sinks), the paper's recipe
    "paper": EvictionPolicy(Threshold(1.0, "head"), WindowScorer(value_norm=False, sinks=0)),
    "value_norm=False": EvictionPolicy(scorer=WindowScorer(value_norm=False)),
    "sinks=0": EvictionPolicy(scorer=WindowScorer(sinks=0)),
    "threshold per head": EvictionPolicy(Threshold(1.0, "head")),
    "threshold per layer": EvictionPolicy(Threshold(1.0, "layer")),
    "ratio,sinks=2": EvictionPolicy(Ratio(0.5), WindowScorer(sinks=2)),
    "ratio per head": EvictionPolicy(Ratio(0.5, "head")),
    "ratio per layer": EvictionPolicy(Ratio(0.5, "layer")),
    "budget per head": EvictionPolicy(TokenBudget(20, "head")),
}


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_every_policy_still_equals_masking_the_evicted_positions(attn, policy) -> None:
    model = kv_model("qwen3", attn)
    ids, mask = prompt(batch=2, pad=5)
    chunks = [torch.randint(3, 120, (2, q)) for q in (3, 1)]
    assert_equals_masking_the_evicted_positions(
        model, RCKVCache(model, window=4, policy=policy), ids, mask, chunks
    )


def test_value_norm_multiplies_each_score_by_its_value_norm() -> None:
    model = kv_model("llama")
    ids, _ = prompt()
    plain = RCKVCache(model, window=4, policy=EvictionPolicy(Threshold(0.0), WindowScorer(value_norm=False)))
    weighted = RCKVCache(model, c=0.0, window=4)
    model(ids, past_key_values=plain)
    model(ids, past_key_values=weighted)
    for index in plain.rc_layers:
        norms = plain.layers[index].values[:, :, :-4].float().norm(dim=-1)  # nothing evicted at c = 0
        torch.testing.assert_close(
            weighted.evictions[index].scores[..., :-4], plain.evictions[index].scores[..., :-4] * norms
        )


def test_sinks_are_kept_in_every_head() -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2, pad=4)
    cache = RCKVCache(model, window=4, policy=EvictionPolicy(Threshold(3.0), WindowScorer(sinks=2)))
    model(ids, attention_mask=mask, past_key_values=cache)
    for eviction in cache.evictions:
        assert eviction.kept[0, :, :2].all() and eviction.kept[1, :, 4:6].all()
        assert not eviction.kept[1, :, :4].any()
        assert not eviction.kept[:, :, 6:-4].all()  # c = 3 evicts others


def test_model_budget_is_one_threshold_over_every_layer_and_head() -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2, pad=4)
    cache = RCKVCache(model, window=4, policy=EvictionPolicy(Threshold(1.2, "model"), WindowScorer(sinks=0)))
    model(ids, attention_mask=mask, past_key_values=cache)
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
    model(ids, past_key_values=ratio)
    assert ratio.compression_ratio == pytest.approx(0.6, abs=1 / (3 * 2 * 40))


@pytest.mark.parametrize("window", [5, 16, 1000])
@pytest.mark.parametrize(
    "policy",
    [
        EvictionPolicy(),
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
    out = model.generate(ids, attention_mask=mask, max_new_tokens=3, do_sample=False, past_key_values=cache)
    assert out.shape == (batch, 8) and cache.compression_ratio == 0.0


def test_the_paper_recipe_is_per_layer_thresholds_on_expected_rc_alone() -> None:
    model = kv_model("llama")
    ids, _ = prompt()
    paper = RCKVCache.paper(model, c=1.0, window=4)
    assert paper.policy == EvictionPolicy(Threshold(1.0, "head"), WindowScorer(value_norm=False, sinks=0))
    default = RCKVCache(model, c=1.0, window=4)
    assert default.policy == EvictionPolicy(Threshold(1.0, "model"), WindowScorer(value_norm=True, sinks=4))
    model(ids, past_key_values=paper)
    for eviction in paper.evictions:  # each key head's own threshold: c times its own mean score
        before = eviction.scores[..., :-4]
        torch.testing.assert_close(eviction.threshold, before.mean(-1))


def test_compression_grows_with_c() -> None:
    model = kv_model("qwen3")
    ids, _ = prompt(length=64)
    ratios = []
    for c in [0.0, 0.5, 1.0, 1.5, 2.0, 4.0]:
        cache = RCKVCache(model, c=c, window=8)
        model(ids, past_key_values=cache)
        ratios.append(cache.compression_ratio)
    assert ratios == sorted(ratios)
    assert ratios[0] == 0.0 and ratios[-1] > ratios[2] > 0.0


def test_ratio_mode_evicts_the_asked_share_of_every_head() -> None:
    model = kv_model("llama")
    ids, _ = prompt(length=50)
    cache = RCKVCache(model, window=5, policy=EvictionPolicy(Ratio(0.6, "head")))
    model(ids, past_key_values=cache)
    assert all(int(e.kept[0, h].sum()) == 20 for e in cache.evictions if e is not None for h in range(2))
    assert cache.compression_ratio == pytest.approx(0.6)
    adaptive = RCKVCache(model, c=1.0, window=5)
    model(ids, past_key_values=adaptive)
    for fixed, free in zip(
        cache.evictions, adaptive.evictions, strict=True
    ):  # same scores, different decisions
        torch.testing.assert_close(fixed.scores, free.scores, equal_nan=True)


def test_bytes_held_match_the_kept_entries() -> None:
    model = kv_model("gemma3")  # a sliding layer, kept as transformers keeps it, beside a full one
    ids, mask = prompt(batch=2, pad=4)
    cache = RCKVCache(model, c=1.0, window=4)
    model.generate(ids, attention_mask=mask, max_new_tokens=3, do_sample=False, past_key_values=cache)
    full = DynamicCache(config=model.config)
    model.generate(ids, attention_mask=mask, max_new_tokens=3, do_sample=False, past_key_values=full)
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
    model(ids, past_key_values=cache)
    for indices, eviction in zip(cache.kept_indices, cache.evictions, strict=True):
        for h in range(2):
            assert indices[h][0].tolist() == eviction.kept[0, h].nonzero().flatten().tolist()


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_beam_search_through_c_zero_equals_the_default_caches_beams(arch) -> None:
    model = kv_model(arch)
    ids, mask = prompt(batch=2, pad=5)
    options = {"max_new_tokens": 6, "num_beams": 3, "num_return_sequences": 3, "do_sample": False}
    options |= {"output_scores": True, "return_dict_in_generate": True}
    default = model.generate(ids, attention_mask=mask, **options)
    kept_all = model.generate(ids, attention_mask=mask, past_key_values=RCKVCache(model, c=0.0), **options)
    assert torch.equal(default.sequences, kept_all.sequences)
    torch.testing.assert_close(default.sequences_scores, kept_all.sequences_scores)
    compressed = model.generate(
        ids, attention_mask=mask, past_key_values=RCKVCache(model, window=4), **options
    )
    assert compressed.sequences.shape == default.sequences.shape


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
            ids, attention_mask=mask, past_key_values=cache, max_new_tokens=4, do_sample=False
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


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"c": -1.0}, "c must be"),
        ({"c": float("nan")}, "c must be"),
        ({"window": 0}, "window must be"),
        ({"budget": 0}, "budget must be"),
        ({"c": 1.0, "budget": 100}, "give one of c"),
        ({"c": 1.0, "policy": EvictionPolicy()}, r"give policy alone .*: c=1.0"),
        ({"decode_every": 4, "policy": EvictionPolicy()}, r"give policy alone .*: decode_every=4"),
        ({"policy": Threshold(1.0)}, "policy must be an EvictionPolicy"),
    ],
)
def test_bad_settings_are_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        RCKVCache(kv_model("llama"), **kwargs)


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


def test_right_padding_is_refused() -> None:
    model = kv_model("llama")
    ids, mask = prompt(batch=2)
    mask[-1, -3:] = 0
    with pytest.raises(ValueError, match="left padding"):
        model(ids, attention_mask=mask, past_key_values=RCKVCache(model))


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


def test_a_cache_bypassed_by_a_later_attention_switch_is_refused() -> None:
    model = kv_model("llama")
    cache = RCKVCache(model)
    model.set_attn_implementation("eager")
    with pytest.raises(RuntimeError, match="bypasses RCKVCache"):
        model(prompt()[0], past_key_values=cache)


def test_bfloat16_models_are_compressed() -> None:
    model = tiny_model("qwen3", dtype=torch.bfloat16)
    ids, mask = prompt(batch=2, pad=4)
    default = model.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False)
    kept_all = model.generate(
        ids, attention_mask=mask, max_new_tokens=6, do_sample=False, past_key_values=RCKVCache(model, c=0.0)
    )
    assert torch.equal(default, kept_all)
    cache = RCKVCache(model, c=1.0, window=4)
    model.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False, past_key_values=cache)
    assert cache.compression_ratio > 0.2
    assert cache.layers[0].keys.dtype == torch.bfloat16


def test_assisted_decoding_is_refused_before_any_work() -> None:
    model, assistant = kv_model("llama"), kv_model("llama")
    cache = RCKVCache(model)
    with pytest.raises(NotImplementedError, match="assisted or speculative decoding"):
        model.generate(prompt()[0], assistant_model=assistant, past_key_values=cache, max_new_tokens=4)
    if hasattr(DynamicCache, "activate_past_recording"):  # transformers asks for it first since 5.3
        assert cache.get_seq_length() == 0


def test_cropping_is_refused() -> None:
    model = kv_model("llama")
    cache = RCKVCache(model)
    model(prompt()[0], past_key_values=cache)
    with pytest.raises(NotImplementedError, match="cropped"):
        cache.crop(-2)


def test_a_layer_on_random_tensors_keeps_what_its_rule_decides() -> None:
    from rcattr.attention import AttentionCall
    from rcattr.capture import raw_logits
    from rcattr.kvcache import LayerState, RCLayer, value_weighted
    from rcattr.kvcache.eviction import apply_chunk, decide, score_chunk

    torch.manual_seed(0)
    batch, kv_heads, heads, n, d, window = 1, 2, 4, 20, 8, 4
    keys, values = torch.randn(batch, kv_heads, n, d), torch.randn(batch, kv_heads, n, d)
    query = torch.randn(batch, heads, n, d)
    layer, state = RCLayer(), LayerState()
    layer.update(keys, values)
    attention = torch.nn.Module()
    attention.layer_idx = 0
    call = AttentionCall(attention, query, keys, values, None, "sdpa")  # plain causality
    scored = score_chunk(layer, call, window, WindowScorer(sinks=2))
    ((keep, threshold),) = decide(Threshold(1.0, "head"), [scored])
    apply_chunk(layer, state, scored, keep, threshold)
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


def test_a_closed_cache_leaves_the_model_and_transformers_as_they_were() -> None:
    from rcattr._compat import registered_attention

    gc.collect()  # caches other tests left behind give their models back first
    model = kv_model("llama")
    ids, _ = prompt()
    before, implementation = registered_attention(), model.config._attn_implementation
    reference = model(ids).logits
    with RCKVCache(model, window=4) as cache:
        assert model.config._attn_implementation != implementation
        other = RCKVCache(model)  # a second open cache of the same model shares the route
        model.generate(ids, max_new_tokens=3, do_sample=False, past_key_values=cache)
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


@torch.no_grad()
def test_a_deep_copy_is_open_on_the_same_model_until_closed() -> None:
    """A compressed prompt continued twice (as the KV benchmark does): the copy holds the same entries, goes
    on exactly like the original, and each closes on its own."""
    import copy

    from rcattr._compat import registered_attention

    gc.collect()
    model = kv_model("llama")
    before = registered_attention()
    ids, mask = prompt(batch=2, pad=5)
    chunk = torch.randint(3, 120, (2, 1))
    cache = RCKVCache(model, window=4)
    model(ids, attention_mask=mask, past_key_values=cache)
    twin = copy.deepcopy(cache)
    assert twin.compression_ratio == cache.compression_ratio > 0
    longer = torch.cat([mask, torch.ones_like(chunk)], -1)
    original = model(chunk, attention_mask=longer, past_key_values=cache).logits
    cache.close()
    copied = model(chunk, attention_mask=longer, past_key_values=twin).logits  # still open
    torch.testing.assert_close(copied, original, rtol=0, atol=0)
    twin.close()
    assert model.config._attn_implementation == "sdpa" and registered_attention() == before
    with pytest.raises(RuntimeError, match="closed"):
        copy.deepcopy(twin)


# ---------------------------------------------------------------------------------------------
# decode-time eviction
# ---------------------------------------------------------------------------------------------


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
        model(token, past_key_values=cache)
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
    model(ids, past_key_values=cache)
    for _ in range(24):
        model(torch.randint(3, 120, (1, 1)), past_key_values=cache)
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
    model.generate(ids, max_new_tokens=6, do_sample=False, past_key_values=cache)
    for index in cache.rc_layers:
        for eviction in cache.states[index].decode_evictions:
            assert eviction.held[..., :4].all() and eviction.threshold is not None
    with pytest.raises(ValueError, match="give one of c"):
        RCKVCache(model, budget=100, c=1.0)
    with pytest.raises(ValueError, match="decode_every must be an int"):
        RCKVCache(model, decode_every=0)
    with pytest.raises(ValueError, match="leaves no room"):
        RCKVCache(model, window=16, decode_every=4, budget=20)


@pytest.mark.parametrize("layer_budget", ["model", "layer"])
def test_a_budget_keeps_the_best_budget_entries_of_the_model_or_of_every_layer(layer_budget) -> None:
    model = kv_model("llama")
    ids, _ = prompt(length=30)
    if layer_budget == "model":
        cache = RCKVCache(model, window=4, budget=10, decode_every=4)
    else:
        policy = EvictionPolicy(TokenBudget(10, scope="layer"), decode=DecodeEviction(every=4))
        cache = RCKVCache(model, window=4, policy=policy)
    model(ids, past_key_values=cache)
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
        model(torch.randint(3, 120, (1, 1)), past_key_values=cache)
    for evictions in zip(*(state.decode_evictions for state in cache.states.values()), strict=True):
        held = torch.stack([e.held[0].sum(-1) for e in evictions])  # [layers, heads]
        if layer_budget == "layer":
            assert held.sum(-1).tolist() == [10 * held.shape[1]] * held.shape[0]
        else:
            assert int(held.sum()) == 10 * held.numel()


def test_budget_keep_keeps_the_protected_then_the_best_scores() -> None:
    scores = torch.tensor([[0.5, float("nan"), 0.9, 0.1, 0.7, 0.3]])
    protected = torch.tensor([[False, False, False, True, False, False]])
    assert budget_keep(scores, protected, 3).tolist() == [[False, False, True, True, True, False]]
    assert budget_keep(scores, protected, 1).tolist() == [[False, False, False, True, False, False]]
    assert budget_keep(scores, protected, 10).sum() == 5  # padding is never kept


@pytest.mark.parametrize("budget", [None, 10])
def test_a_dropped_cache_is_freed_without_the_garbage_collector(budget) -> None:
    """Neither the layers nor the model's hook refer back to the cache: dropping the last reference frees it
    (and gives the model its attention back) at once, with the cross-layer decisions done."""
    import weakref

    from rcattr._compat import registered_attention

    gc.collect()  # caches other tests left behind give their models back first
    model = kv_model("llama")
    before = registered_attention()
    threshold = {"c": 1.0} if budget is None else {"budget": budget}
    gc.disable()
    try:
        cache = RCKVCache(model, window=4, decode_every=2, **threshold)
        model.generate(prompt(length=30)[0], max_new_tokens=5, do_sample=False, past_key_values=cache)
        dropped = weakref.ref(cache)
        del cache
        assert dropped() is None
        assert model.config._attn_implementation == "sdpa" and registered_attention() == before
    finally:
        gc.enable()


def test_cache_argument_names_the_cache_as_the_installed_transformers_wants() -> None:
    """``cache=`` where the forward takes it (5.24 deprecates ``past_key_values=`` with a FutureWarning),
    ``past_key_values=`` on the 5.2 line (whose generate refuses ``cache=``, and whose forward ignores it):
    no warning either way, and the cache is the one generate fills. rcattr's own generate calls too."""
    import warnings

    from rcattr import RCAttributor, TopHeads

    model = tiny_model("llama")
    ids = torch.randint(3, 120, (1, 30))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        with RCKVCache(model, window=4) as cache:
            model.generate(
                ids, **cache_argument(model, cache), max_new_tokens=3, do_sample=False, pad_token_id=0
            )
            assert cache.get_seq_length() == 32 and 0 < cache.compression_ratio < 1  # filled, and evicted
            model(ids[:, :1], **cache_argument(model, cache))
        result = RCAttributor(model, char_tokenizer(), TopHeads(4)).attribute(
            "Paris is in France.", gen_args={"max_new_tokens": 3}
        )
    assert result.answer
