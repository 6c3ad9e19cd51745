"""The integrated-gradients baseline (rcattr.baselines.integrated_gradients) against captum's own token scores."""

from __future__ import annotations

import torch
from captum.attr import LayerIntegratedGradients, LLMGradientAttribution, TextTokenInput

from rcattr.baselines import (
    IntegratedGradientsAttributor,
    RandomAttributor,
)
from tests.helpers.attribution import ANSWER, BRACED_INPUT


def test_integrated_gradients_sums_captum_token_attributions(llama, tokenizer) -> None:
    result = IntegratedGradientsAttributor(llama, tokenizer, n_steps=3).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    example = RandomAttributor(llama, tokenizer).prepare(BRACED_INPUT, ANSWER, "chunk", "sentence")
    captum = LLMGradientAttribution(LayerIntegratedGradients(llama, llama.get_input_embeddings()), tokenizer)
    raw = captum.attribute(
        TextTokenInput(example.prompt.text, tokenizer),
        target=example.ids[0, example.answer_start :],
        n_steps=3,
    ).token_attr  # [answer tokens, prompt tokens]
    per_span = torch.stack([raw[:, r].sum(-1) for r in example.context_ranges], dim=-1)
    torch.testing.assert_close(result.seq_attr, per_span.sum(0), atol=1e-4, rtol=1e-4)
    expected_units = torch.stack([per_span[list(rows)].sum(0) for rows in example.unit_ranges])
    torch.testing.assert_close(result.token_attr, expected_units, atol=1e-4, rtol=1e-4)
