"""The KV benchmark's methods (rcattr.eval.kv.methods): RCKVCache's variants and kvpress's presses as kvpress runs them."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from rcattr.eval.kv import KVBenchmarkConfig
from rcattr.eval.kv.methods import (
    FullCache,
    PressMethod,
    RCMethod,
    attention_scale,
    import_kvpress,
    rc_policy,
)
from rcattr.eval.kv.presses import PRESSES
from rcattr.eval.kv.protocol import greedy_answer
from rcattr.eval.kv.scorers import AblationScorer, MaxPooledScorer, QueryMaxScorer, SoftmaxMaxScorer
from rcattr.eval.kv.variants import rc_options
from rcattr.kvcache import DistilledScorer, RCKVCache, WindowScorer
from rcattr.kvcache.context.prompt import split_prompt
from tests.helpers import (
    KV_CONTEXT,
    KV_QUESTION,
    PARAGRAPHS,
    char_tokenizer,
    tiny_model,
    wide_llama,
)

pytestmark = pytest.mark.transformers_line


def test_the_default_variant_is_rckvcaches_defaults() -> None:
    default = RCKVCache(tiny_model("llama"))  # half of the prompt evicted
    variant = KVBenchmarkConfig("squad").rc_variants[0]
    assert rc_policy(variant, ratio=0.5, chunks="prompt") == default.policy
    assert rc_policy(variant, c=1.0, chunks="prompt") == RCKVCache(tiny_model("llama"), c=1.0).policy
    assert rc_policy(variant).chunks == "every"  # the question-after-context protocol's RCKVCache, as in 0.1
    assert rc_options("paper") == {
        "statistic": "expected",
        "value_norm": False,
        "sinks": 0,
        "scope": "head",
        "pooling": "mean",
        "probe": "window",
        "prefill_chunk": None,
        "blend": 0.0,
    }
    paper = RCKVCache.paper(tiny_model("llama"), c=0.7).policy
    assert rc_policy("paper", c=0.7, chunks="prompt") == paper
    assert isinstance(rc_policy("upper_bound").scorer, AblationScorer)


def test_the_levers_variants_build_their_scorers() -> None:
    assert type(rc_policy("max_pool").scorer) is MaxPooledScorer
    assert type(rc_policy("replay").scorer) is QueryMaxScorer
    softmax = rc_policy("replay+softmax", scale=0.125).scorer
    assert isinstance(softmax, SoftmaxMaxScorer) and softmax.scale == 0.125
    with pytest.raises(ValueError, match="expected or softmax"):
        rc_policy("upper_bound+max_pool")
    with pytest.raises(ValueError, match="a replay is one forward over the context"):
        RCMethod(1.0, 16, "replay+chunk=64")
    assert attention_scale(tiny_model("llama")) == pytest.approx(tiny_model("llama").config.head_dim ** -0.5)


@pytest.mark.kvpress
def test_observed_attention_runs_eager_and_gives_the_model_its_attention_back() -> None:
    model, tokenizer = wide_llama(), char_tokenizer()
    implementation = model.config._attn_implementation
    prompt = split_prompt(tokenizer, PARAGRAPHS[1], "Where is Paris?")
    cache = PressMethod("observed_attention", 0.5).prefill(model, prompt.context_ids)
    assert cache.layers[0].keys.shape[2] == prompt.n_context // 2
    assert model.config._attn_implementation == implementation


@pytest.mark.kvpress
@pytest.mark.parametrize("name", ["snapkv", "knorm", "adakv_snapkv"])
def test_press_answers_equal_kvpress_pipeline(name) -> None:
    from kvpress.pipeline import KVPressTextGenerationPipeline

    model, tokenizer = wide_llama(), char_tokenizer()
    prompt = split_prompt(tokenizer, PARAGRAPHS[1], "Where is Paris?")
    method = PressMethod(name, 0.5)
    ours = greedy_answer(model, method.prefill(model, prompt.context_ids), prompt, max_new_tokens=8)
    pipeline = KVPressTextGenerationPipeline(model=model, tokenizer=tokenizer)
    with torch.no_grad():
        theirs = pipeline._forward(
            {"context_ids": prompt.context_ids, "questions_ids": [prompt.question_ids]},
            max_new_tokens=8,
            press=PRESSES[name](import_kvpress(), 0.5),
        )
    assert [tokenizer.decode(ours, skip_special_tokens=True)] == theirs


def test_rc_method_measures_the_compression_of_its_cache() -> None:
    model, tokenizer = tiny_model("llama"), char_tokenizer()
    prompt = split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION)
    method = RCMethod(c=1.0, window=8)
    cache = method.prefill(model, prompt.context_ids)
    compression = method.compression(model, cache, prompt.n_context)
    assert 0.0 < compression.ratio == cache.compression_ratio < 1.0
    assert compression.bytes_ratio == pytest.approx(cache.nbytes() / cache.full_nbytes())
    full = FullCache()
    assert full.compression(model, full.prefill(model, prompt.context_ids), prompt.n_context).ratio == 0.0
    assert isinstance(full.prefill(model, prompt.context_ids), DynamicCache)


def test_rc_method_with_a_chunk_prefills_the_context_chunk_by_chunk() -> None:
    model, tokenizer = tiny_model("llama"), char_tokenizer()
    context_ids = split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION).context_ids
    cache = RCMethod(c=1.0, window=8, ratio=0.5, variant="model_budget+value_norm+sinks=4+chunk=32").prefill(
        model, context_ids
    )
    starts = [eviction.start for eviction in next(iter(cache.states.values())).evictions]
    assert starts == list(range(0, context_ids.shape[1], 32))


def test_the_distilled_variant_scores_with_the_predictor_shipped_for_the_model() -> None:
    assert type(rc_policy("distilled").scorer) is WindowScorer  # no model yet: the words are checked
    with pytest.raises(ValueError, match="no other statistic"):
        rc_policy("distilled+softmax")
    model, tokenizer = tiny_model("llama"), char_tokenizer()
    context_ids = split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION).context_ids
    with pytest.raises(ValueError, match="no score predictor ships .* python -m rcattr.eval.kv.distill"):
        RCMethod(1.0, 16, "distilled", ratio=0.5).prefill(model, context_ids)


@pytest.mark.real_model
def test_the_distilled_variant_runs_on_the_default_model(smollm2) -> None:
    model, tokenizer = smollm2
    context_ids = split_prompt(tokenizer, KV_CONTEXT * 4, KV_QUESTION).context_ids
    cache = RCMethod(1.0, 16, "model_budget+value_norm+sinks=4+distilled", ratio=0.5).prefill(
        model, context_ids
    )
    assert isinstance(cache.policy.scorer, DistilledScorer)
    assert cache.compression_ratio == pytest.approx(0.5, abs=0.02)
