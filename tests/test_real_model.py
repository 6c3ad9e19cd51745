"""Checks on the offline default model (SmolLM2-135M-Instruct); slower, marked, and run in CI."""

from __future__ import annotations

import copy

import pytest
import torch
from reference import float64_logits, record_eager_qk

from rcattr.capture import LogitCapture, LogitStore
from rcattr.models import load_model

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def default_model():
    return load_model()


def test_default_model_is_smollm2(default_model):
    model, tokenizer = default_model
    config = model.config
    assert (config.model_type, config.num_hidden_layers, config.num_attention_heads) == ("llama", 30, 9)
    assert config.num_key_value_heads == 3
    assert model.config._attn_implementation == "sdpa"
    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.chat_template


@torch.no_grad()
def test_capture_on_default_model_equals_eager(default_model):
    model, tokenizer = default_model
    messages = [{"role": "user", "content": "Paris is the capital of France. What is the capital of France?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tokenizer(prompt + "The capital of France is Paris.", return_tensors="pt").input_ids
    prompt_len = len(tokenizer(prompt).input_ids)
    rows = slice(prompt_len, None)

    plain = model(ids).logits
    store = LogitStore()
    with LogitCapture(model, store, query_positions=rows):
        captured = model(ids).logits
    assert (captured - plain).abs().max() <= 1e-6

    reference_model = copy.deepcopy(model).double()
    reference_model.set_attn_implementation("eager")
    with record_eager_qk(reference_model) as records:
        reference_model(ids)
    for layer in range(30):
        [(logits, step)] = store.steps[layer]
        [(query, key)] = records[layer]
        expected = float64_logits(query, key)[:, :, rows]
        assert step.query_positions.tolist() == list(range(prompt_len, ids.shape[1]))
        error = (logits.double() - expected).abs().max() / expected.abs().max()
        assert error <= 1e-4, f"layer {layer}: relative error {error:.2e}"
