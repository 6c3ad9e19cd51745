"""Random scores: the floor every method must beat."""

from __future__ import annotations

import hashlib

import torch
from transformers import PreTrainedModel

from rcattr.attribution.base import AttributionInput, Example, SpanAttributor
from rcattr.attribution.result import RCAttributionResult
from rcattr.protocols import TokenizerLike


class RandomAttributor(SpanAttributor):
    """Independent uniform scores for every (output unit, span), drawn from `seed` and the example
    itself: the same example gets the same scores whatever was attributed before (a sharded benchmark
    equals a single run)."""

    name = "random"

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike, seed: int = 0) -> None:
        super().__init__(model, tokenizer)
        self.seed = seed

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        digest = hashlib.sha256(f"{self.seed}\0{example.prompt.text}\0{example.answer}".encode()).digest()
        generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
        n_spans = len(example.context_spans)
        seq_attr = torch.rand(n_spans, generator=generator)
        token_attr = torch.rand(len(example.output_spans), n_spans, generator=generator)
        return example.result(seq_attr, token_attr, self.name, inp)
