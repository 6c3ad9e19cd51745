"""Random scores: the floor every method must beat."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from rcattr._typing import TokenizerLike
from rcattr.base import AttributionInput, Example, SpanAttributor
from rcattr.result import RCAttributionResult


class RandomAttributor(SpanAttributor):
    """Independent uniform scores for every (output unit, span); reproducible from ``seed``."""

    name = "random"

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike, seed: int = 0) -> None:
        super().__init__(model, tokenizer)
        self.generator = torch.Generator().manual_seed(seed)

    def _explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        n_spans = len(example.context_spans)
        seq_attr = torch.rand(n_spans, generator=self.generator)
        token_attr = torch.rand(len(example.output_spans), n_spans, generator=self.generator)
        return example.result(seq_attr, token_attr, self.name, inp)
