"""Perturbation baselines through captum's `LLMAttribution`: spans removed, the answer re-scored.

Each method removes context spans (replaces them by the empty string), and measures the
teacher-forced log-probability of the answer again (`forward_in_tokens=False`: one forward per
perturbation):

* [`AblationAttributor`][rcattr.baselines.perturbation.AblationAttributor]: leave one span out (`FeatureAblation`), one forward per span plus
  one for the full prompt. ContextCite and the other surrogate methods approximate exactly these
  effects with fewer passes.
* [`ShapleySamplingAttributor`][rcattr.baselines.perturbation.ShapleySamplingAttributor]: Shapley values estimated from random span orders
  (`ShapleyValueSampling`).
* [`KernelShapAttributor`][rcattr.baselines.perturbation.KernelShapAttributor]: Kernel SHAP, a weighted linear fit to random span subsets
  (`KernelShap`).

The two sampling methods get a budget in forward passes (`forwards`, default 64: ContextCite's
number of ablations), so every perturbation method is compared at the same cost. Their draws come from
torch's generator, seeded per call (`seed`) without touching the global one.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from captum.attr import (
    FeatureAblation,
    KernelShap,
    LLMAttribution,
    PerturbationAttribution,
    ShapleyValueSampling,
    TextTemplateInput,
    TextTokenInput,
)
from transformers import PreTrainedModel

from rcattr.attribution.base import AttributionInput, Example, SpanAttributor
from rcattr.attribution.result import RCAttributionResult
from rcattr.attribution.spans import unit_sum
from rcattr.protocols import TokenizerLike

DEFAULT_FORWARDS = 64
"""The sampling methods' budget in forward passes: ContextCite's default number of ablations."""


def placed_spans(example: Example) -> list[tuple[int, int, int]]:
    """`(start, end, span index)` of each context span in the prompt text, in text order.

    Raises ValueError when spans overlap: a character cannot be removed with two spans.
    """
    prompt = example.prompt
    placed = sorted(
        (prompt.chunk_starts[span.source] + span.start, prompt.chunk_starts[span.source] + span.end, index)
        for index, span in enumerate(example.context_spans)
    )
    for (_, end, _), (start, _, _) in zip(placed, placed[1:], strict=False):
        if start < end:
            raise ValueError("removing spans needs non-overlapping context spans")
    return placed


def span_template(example: Example) -> TextTemplateInput:
    """The prompt as a captum template whose values are the context spans (in span order)."""
    text = example.prompt.text
    pieces, cursor = [], 0
    for start, end, index in placed_spans(example):
        pieces.append(_escape(text[cursor:start]) + f"{{{index}}}")
        cursor = end
    pieces.append(_escape(text[cursor:]))
    values = [span.text for span in example.context_spans]
    return TextTemplateInput("".join(pieces), values=values, baselines=[""] * len(values))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


class _CaptumPerturbation(SpanAttributor):
    """A captum perturbation method over the context spans; subclasses name the method and its arguments.

    A span's score for an output unit is its effect on the summed log-probability of the unit's tokens
    (signed: a span whose removal helps the answer scores below 0). captum tokenizes the prompt itself,
    with the tokenizer's special tokens. Methods without per-token effects (Kernel SHAP) give every unit
    the whole answer's scores.
    """

    algorithm: ClassVar[type[PerturbationAttribution]]
    seed = 0  # the draws of a sampling method

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike) -> None:
        super().__init__(model, tokenizer)
        self.captum = LLMAttribution(self.algorithm(model), tokenizer)

    def _options(self, n_spans: int) -> dict[str, Any]:
        """The keyword arguments of the captum method's `attribute` for `n_spans` spans."""
        return {}

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        captum_input = inp if isinstance(inp, (TextTemplateInput, TextTokenInput)) else span_template(example)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            attribution = self.captum.attribute(
                captum_input,
                target=example.ids[0, example.answer_start :].cpu(),
                forward_in_tokens=False,
                **self._options(captum_input.n_itp_features),
            )
        seq_attr = attribution.seq_attr.float()
        if attribution.token_attr is None:  # one effect for the whole answer
            token_attr = seq_attr.expand(len(example.unit_ranges), -1)
        else:
            token_attr = unit_sum(attribution.token_attr.float(), example.unit_ranges)  # [A, n] -> [U, n]
        return example.result(seq_attr, token_attr, self.name, inp)


class AblationAttributor(_CaptumPerturbation):
    """Log-probability drop of the answer when each span is removed (captum `FeatureAblation`).

    Parameters
    ----------
    batch : int, default 1
        Ablations evaluated per forward pass (captum's `perturbations_per_eval`).
    """

    name = "ablation"
    algorithm = FeatureAblation

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike, batch: int = 1) -> None:
        super().__init__(model, tokenizer)
        self.batch = batch

    def _options(self, n_spans: int) -> dict[str, Any]:
        return {"perturbations_per_eval": self.batch}


class _Sampled(_CaptumPerturbation):
    """A sampling method at a budget of `forwards` forward passes, its draws seeded by `seed`."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        forwards: int = DEFAULT_FORWARDS,
        seed: int = 0,
    ) -> None:
        if forwards < 2:
            raise ValueError(f"forwards must be at least 2, got {forwards}")
        super().__init__(model, tokenizer)
        self.forwards = forwards
        self.seed = seed


class ShapleySamplingAttributor(_Sampled):
    """Shapley values of the spans from random orders (captum `ShapleyValueSampling`).

    Each order costs one forward per span, so `forwards // n_spans` orders are drawn (at least one).
    """

    name = "shapley"
    algorithm = ShapleyValueSampling

    def _options(self, n_spans: int) -> dict[str, Any]:
        return {"n_samples": max(1, self.forwards // max(n_spans, 1))}


class KernelShapAttributor(_Sampled):
    """Kernel SHAP (captum `KernelShap`): `forwards` random span subsets, one forward each, and a
    weighted linear fit. captum gives it no per-token effects: every output unit gets the answer's scores."""

    name = "kernel_shap"
    algorithm = KernelShap

    def _options(self, n_spans: int) -> dict[str, Any]:
        return {"n_samples": self.forwards}
