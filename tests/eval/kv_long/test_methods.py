"""The long-generation benchmark's methods (rcattr.eval.kv_long.methods): budgets held while decoding."""

from __future__ import annotations

import pytest
import torch

from rcattr.eval.kv_long.config import DecodeBudget
from rcattr.eval.kv_long.methods import (
    DecodingPressMethod,
    RCDecoding,
    prefill_ratio,
)
from rcattr.eval.kv_long.runner import decode
from rcattr.kvcache import RCKVCache
from tests.helpers import wide_llama

pytestmark = pytest.mark.transformers_line


def test_question_window_without_decode_time_eviction_is_refused() -> None:
    with pytest.raises(ValueError, match="question_window=True needs decode_time=True"):
        RCDecoding(decode_time=False, question_window=True)


def test_decode_time_rc_stays_at_its_budget_while_prefill_only_grows(model_and_prompt) -> None:
    model, prompt = model_and_prompt
    budget = DecodeBudget(tokens=60, every=8)
    runs = {
        method.name: decode(
            model,
            method.start(model, prompt.context_ids, budget),
            prompt,
            torch.tensor([], dtype=torch.long),
            40,
        )
        for method in (RCDecoding(), RCDecoding(question_window=True), RCDecoding(decode_time=False))
    }
    cache = RCKVCache(model, budget=60)
    entry = 2 * 2 * wide_llama().config.head_dim * 4 + 2 * 4  # keys and values of 2 heads, and positions
    layers = len(cache.layers)
    question = prompt.question_ids.shape[1]
    bound = (60 + question + 8) * entry * layers
    assert max(runs["rc"].nbytes) <= bound and max(runs["rc_question"].nbytes) <= bound
    assert runs["rc_prefill_only"].nbytes[-1] > bound  # every generated token kept
    assert runs["rc"].nbytes[-1] < runs["rc_prefill_only"].nbytes[-1]
    cache.close()


def test_the_question_is_cut_to_the_budget_as_when_the_rows_were_measured(model_and_prompt) -> None:
    model, prompt = model_and_prompt
    decoder = RCDecoding().start(model, prompt.context_ids, DecodeBudget(tokens=60, every=8))
    assert decoder.cache.policy.chunks == "every"  # rcattr 0.1's chunks: the committed kv_long rows re-run


def test_kvpress_ratio_keeps_the_budget() -> None:
    assert int(1000 * (1 - prefill_ratio(1000, 256))) == 256
    assert int(999 * (1 - prefill_ratio(999, 300))) == 300
    assert prefill_ratio(200, 256) == 0.0


@pytest.mark.kvpress
@pytest.mark.parametrize("scorer", ["knorm", "snapkv", "tova", "expected_attention", "streaming_llm"])
def test_kvpress_decoding_presses_hold_the_same_budget_as_rc(model_and_prompt, scorer) -> None:
    model, prompt = model_and_prompt
    budget = DecodeBudget(tokens=60, every=8)
    none = torch.tensor([], dtype=torch.long)
    press = decode(
        model, DecodingPressMethod(scorer).start(model, prompt.context_ids, budget), prompt, none, 30
    )
    rc = decode(model, RCDecoding().start(model, prompt.context_ids, budget), prompt, none, 30)
    entry = 2 * 2 * model.config.head_dim * 4  # keys and values of 2 heads
    assert len(press.nbytes) == len(rc.nbytes)
    question = prompt.question_ids.shape[1]
    assert max(press.nbytes) <= (60 + question + 8) * entry * model.config.num_hidden_layers
    assert press.nbytes[-1] < max(press.nbytes)  # cut back during decoding
