"""The KV benchmark's metrics (rcattr.eval.kv.metrics): VER, head-output capture and ROUGE."""

from __future__ import annotations

import pytest
import torch

from rcattr.eval.kv.metrics import LastLayerHeadOutputs, rouge, value_error_rate
from tests.helpers import tiny_model


def test_value_error_rate_on_a_hand_made_case() -> None:
    reference = torch.tensor([[[3.0, 4.0], [1.0, 0.0]], [[0.0, 2.0], [0.0, 0.0]]])  # [tokens 2, heads 2, d 2]
    compressed = torch.tensor([[[3.0, 4.0], [1.0, 1.0]], [[0.0, -2.0], [0.0, 0.0]]])
    # per (token, head): 0/5, 1/1, 4/2, and 0/0 -> 0 (a zero reference counts as no error when equal)
    assert value_error_rate(reference, compressed) == pytest.approx((0 + 1 + 2 + 0) / 4)
    assert value_error_rate(reference, reference) == 0.0
    assert value_error_rate(reference, torch.zeros_like(reference)) == pytest.approx(3 / 4)


def test_value_error_rate_rejects_mismatched_or_empty_outputs() -> None:
    with pytest.raises(ValueError, match="shapes"):
        value_error_rate(torch.ones(2, 3, 4), torch.ones(2, 3, 5))
    with pytest.raises(ValueError, match="tokens >= 1"):
        value_error_rate(torch.ones(0, 3, 4), torch.ones(0, 3, 4))


def test_captured_head_outputs_are_what_the_output_projection_receives() -> None:
    model = tiny_model("llama")
    attention = model.model.layers[-1].self_attn
    seen = {}
    handle = attention.register_forward_hook(lambda module, args, output: seen.update(out=output[0]))
    with LastLayerHeadOutputs(model) as outputs:
        model(torch.randint(3, 120, (1, 7)))
    handle.remove()
    heads = outputs.heads
    assert heads.shape == (1, 7, 4, 16)
    torch.testing.assert_close(attention.o_proj(heads.flatten(-2)), seen["out"])


def test_head_capture_refuses_a_model_without_o_proj() -> None:
    model = tiny_model("llama")
    del model.model.layers[-1].self_attn.o_proj
    with pytest.raises(ValueError, match="o_proj"):
        LastLayerHeadOutputs(model)


def test_rouge_takes_the_best_gold_answer() -> None:
    assert rouge("the cat sat", ["a dog", "the cat sat"]) == {"rouge1": 1.0, "rougeL": 1.0}
    scores = rouge("cats sitting on mats", ["the cat sat on the mat"])
    assert 0.0 < scores["rougeL"] <= scores["rouge1"] < 1.0  # stemming matches cat(s) and mat(s)
    with pytest.raises(ValueError, match="no reference"):
        rouge("x", [])
