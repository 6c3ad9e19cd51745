"""Integrated gradients on the input embeddings through captum, summed over each span's tokens."""

from __future__ import annotations

import torch
from captum.attr import LayerIntegratedGradients, LLMGradientAttribution, TextTokenInput
from transformers import PreTrainedModel

from rcattr.attribution.base import AttributionInput, Example, SpanAttributor
from rcattr.attribution.result import RCAttributionResult
from rcattr.attribution.spans import span_sum, unit_sum
from rcattr.protocols import TokenizerLike


class IntegratedGradientsAttributor(SpanAttributor):
    """captum's `LLMGradientAttribution(LayerIntegratedGradients(model, embeddings))`.

    captum attributes each answer token's log-probability separately, with `n_steps` forward and
    backward passes each: the cost is `n_answer_tokens x n_steps` passes, the most of any method.
    A token's attribution is its embedding attribution summed over the hidden dimension (the IG
    authors' convention, as in captum); a span's score is the signed sum over its tokens.

    Parameters
    ----------
    n_steps : int, default 16
        Riemann steps of the integral (captum's default is 50).
    internal_batch_size : int, optional
        Steps per forward pass (default: all of them).
    """

    name = "integrated_gradients"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        n_steps: int = 16,
        internal_batch_size: int | None = None,
    ) -> None:
        super().__init__(model, tokenizer)
        self.n_steps = n_steps
        self.internal_batch_size = internal_batch_size or n_steps
        layer = LayerIntegratedGradients(model, model.get_input_embeddings())
        self.captum = LLMGradientAttribution(layer, tokenizer)

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        token_input = TextTokenInput(example.prompt.text, self.tokenizer)
        captum_ids = token_input.inp_tensor[0].tolist()
        prompt_ids = example.ids[0, : example.answer_start].tolist()
        shift = len(captum_ids) - len(prompt_ids)  # captum adds the tokenizer's special tokens
        if shift < 0 or captum_ids[shift:] != prompt_ids:
            raise RuntimeError(
                "captum tokenized the prompt differently from rcattr; cannot map tokens to spans"
            )
        with torch.enable_grad():
            attribution = self.captum.attribute(
                token_input,
                target=example.ids[0, example.answer_start :].cpu(),
                n_steps=self.n_steps,
                internal_batch_size=self.internal_batch_size,
            )
        per_token = attribution.token_attr[:, shift:].float()  # [A, prompt tokens]
        per_span = span_sum(per_token, example.context_ranges)  # [A, n_spans]
        return example.result(per_span.sum(0), unit_sum(per_span, example.unit_ranges), self.name, inp)
