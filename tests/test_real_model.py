"""Checks on the offline packaged models (SmolLM2-135M-Instruct, Gemma-3-270m); marked, run in CI."""

from __future__ import annotations

import copy

import pytest
import torch

from rcattr.runtime.capture import LogitCapture, LogitStore
from rcattr.runtime.models import DEFAULT_MODEL
from tests.reference import float64_logits, record_eager_qk

pytestmark = pytest.mark.real_model

ANSWER_TOKENS = 24


def test_default_model_is_smollm2(smollm2):
    model, tokenizer = smollm2
    config = model.config
    assert config.name_or_path == DEFAULT_MODEL
    assert (config.model_type, config.num_hidden_layers, config.num_attention_heads) == ("llama", 30, 9)
    assert config.num_key_value_heads == 3
    assert model.config._attn_implementation == "sdpa"
    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.chat_template


def test_gemma3_has_sliding_and_global_layers(gemma3):
    config = gemma3[0].config
    assert (config.model_type, config.num_key_value_heads, config.head_dim) == ("gemma3_text", 1, 256)
    assert {"sliding_attention", "full_attention"} == set(config.layer_types)


def _long_text(sentences: int) -> str:
    return " ".join(
        f"Fact {i}: the {i % 7}th river flows past town {i * 13 % 101}." for i in range(sentences)
    )


@pytest.mark.parametrize(("model_name", "sentences"), [("smollm2", 6), ("gemma3", 60)])
@torch.no_grad()
def test_capture_equals_float64_eager(model_name, sentences, request):
    model, tokenizer = request.getfixturevalue(model_name)
    ids = tokenizer(_long_text(sentences), return_tensors="pt").input_ids
    rows = slice(ids.shape[1] - ANSWER_TOKENS, None)

    plain = model(ids, logits_to_keep=1, output_hidden_states=True).hidden_states[-1]
    with LogitCapture(model, LogitStore(), query_positions=rows):
        captured = model(ids, logits_to_keep=1, output_hidden_states=True).hidden_states[-1]
    assert (captured - plain).abs().max() <= 1e-6

    # under eager attention the q and k the kernel gets are recorded in the very pass that is captured: their
    # product in float64 is the exact logit (q and k of another pass differ by the kernels' rounding, and a
    # float64 copy of the model would measure how float32 rounding grows through the layers)
    eager_model = copy.deepcopy(model)
    eager_model.set_attn_implementation("eager")
    store = LogitStore()
    with record_eager_qk(eager_model) as records, LogitCapture(eager_model, store, query_positions=rows):
        eager_model(ids, logits_to_keep=1)
    del eager_model

    window = getattr(model.config, "sliding_window", None)
    for layer in range(model.config.num_hidden_layers):
        [(logits, step)] = store.steps[layer]
        [(query, key)] = records[layer]
        expected = float64_logits(query, key)[:, :, rows]
        error = (logits.double() - expected).abs().max() / expected.abs().max()
        assert error <= 5e-6, f"layer {layer}: relative error {error:.2e}"
        distance = step.query_positions[:, None] - step.key_positions[None, :]
        sees = distance >= 0
        if step.sliding_window is not None:
            assert step.sliding_window == window
            sees &= distance < window
        assert torch.equal(step.visible[0], sees), f"layer {layer}: visible keys"
    if model_name == "gemma3":  # the prompt is long enough for the window to hide the first tokens
        assert ids.shape[1] > window + ANSWER_TOKENS


def test_gemma3_chooses_heads_among_its_full_attention_layers_when_the_documents_lie_beyond_the_window(
    gemma3,
):
    """Three documents of ~1,000 tokens together: Gemma-3's sliding layers (512 tokens) do not reach the first
    ones from the answer, so the heads are chosen among the 12 of its three full-attention layers; SmolLM2,
    whose layers all see everything, chooses among all of its heads (issue 60)."""
    from rcattr import ContextInput, RCAttributor

    model, tokenizer = gemma3
    documents = [_long_text(30), "The 3th river is the Rhine.", _long_text(30)]
    result = RCAttributor(model, tokenizer).attribute(
        ContextInput(documents, "Which river is the 3th?"), "The 3th river is the Rhine.", granularity="chunk"
    )
    selection = result.head_selection
    full = [layer for layer, kind in enumerate(model.config.layer_types) if kind == "full_attention"]
    assert [layer for layer, reach in enumerate(selection.reach.tolist()) if reach == 1.0] == full
    assert float(selection.reach.min()) < 0.6 and selection.seeing == 4 * len(full)
    assert {layer for layer, _ in selection.as_pairs()} <= set(full)
    assert "12 of the model's 72 heads see the whole context from the answer" in selection.describe()
