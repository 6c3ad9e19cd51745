"""The ablation's levers that lost (docs/benchmarks/attribution.md), kept here as experimental pieces so that every
row of the ablation still reproduces: a span scorer with span reductions, sink skipping and calibration
against a content-free answer, margin weights, and heads selected per output unit.

None of them is part of [`RCAttributor`][rcattr.attribution.attributor.RCAttributor]; [`Recipe`][rcattr.eval.attribution.recipes.Recipe]
combines them with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import ClassVar, Literal

import torch
from transformers import DynamicCache, PreTrainedModel

from rcattr.attribution.scorers import AttentionScorer, SpanScorer
from rcattr.attribution.spans import SpanBlock, SpanIndex
from rcattr.heads.scores import LayerRC, LayerSuperiority
from rcattr.heads.selection import HeadSelection
from rcattr.heads.selectors import HeadSelector
from rcattr.protocols import TokenizerLike
from rcattr.runtime.capture import CaptureStep, LogitCapture
from rcattr.runtime.compat import cache_argument

SpanReduce = Literal["sum", "mean", "top"]
HeadWeighting = Literal["equal", "margin"]
HEAD_WEIGHTINGS: tuple[str, ...] = ("equal", "margin")


@dataclass(frozen=True)
class PriorBlock(SpanBlock):
    """A [`SpanBlock`][rcattr.attribution.spans.SpanBlock] with `prior [H, K]`: the attention each key receives from a
    content-free answer, for a calibrated [`LeverScorer`][rcattr.eval.attribution.levers.LeverScorer]."""

    prior: torch.Tensor | None = None

    @classmethod
    def of(cls, block: SpanBlock, prior: torch.Tensor) -> PriorBlock:
        return cls(**{f.name: getattr(block, f.name) for f in fields(block)}, prior=prior)


@dataclass
class LeverScorer(AttentionScorer):
    """[`AttentionScorer`][rcattr.attribution.scorers.AttentionScorer] with the span-length, sink and calibration levers.

    Parameters
    ----------
    continuation : float in [0, 1), default 0.8
        As [`AttentionScorer`][rcattr.attribution.scorers.AttentionScorer]'s.
    reduce : {"sum", "mean", "top"}, default "sum"
        A span's score from its tokens' mass: the total; the mean (length-normalised); or the mean
        of its `top_m` largest (AttnTrace's top-K averaging, insensitive to span length).
    top_m : int, default 5
        Tokens kept per span by `reduce="top"`.
    skip_first : bool, default False
        Leave out each span's first token, where attention sinks and format tokens sit.
    calibration : str, optional
        A content-free answer (e.g. `"N/A"`). The pass runs it after the prompt, reusing the prompt's
        KV cache ([`prompt_priors`][rcattr.eval.attribution.levers.prompt_priors]), and the attention it gives each context token is subtracted,
        clamped at 0, before the spans are scored (the calibration of ICR and QRHead).
    """

    reduce: SpanReduce = "sum"
    top_m: int = 5
    skip_first: bool = False
    calibration: str | None = None
    name: ClassVar[str] = "attention"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reduce not in ("sum", "mean", "top"):
            raise ValueError(f"reduce={self.reduce!r}; choose 'sum', 'mean' or 'top'")
        if self.top_m < 1:
            raise ValueError(f"top_m={self.top_m} must be at least 1")
        if self.calibration is not None and not self.calibration.strip():
            raise ValueError("calibration is an empty answer; give a content-free answer such as 'N/A'")

    def context_mass(self, block: SpanBlock) -> torch.Tensor:
        mass = super().context_mass(block)  # [U, H, R, C]
        if self.calibration is None:
            return mass
        if not isinstance(block, PriorBlock) or block.prior is None:
            raise ValueError("a calibrated scorer needs the prior of its content-free answer in the block")
        prior = block.prior.index_select(-1, block.context_keys).to(mass.dtype)  # [H, C]
        return (mass - prior[:, None]).clamp_min(0)

    def score(self, block: SpanBlock) -> torch.Tensor:
        tokens, spans = self.token_mass(block), block.spans  # [U, H, C]
        if self.reduce == "sum" and not self.skip_first:
            return spans.sum(tokens)
        index, in_span = spans.padded  # [S, W]: each span's tokens, its first one in column 0
        if self.skip_first:
            in_span = in_span.clone()
            in_span[:, 0] = False
        per_span = tokens[..., index]  # [U, H, S, W]
        if self.reduce == "top":
            per_span = per_span.masked_fill(~in_span, float("-inf"))
            top = per_span.topk(min(self.top_m, per_span.shape[-1]), dim=-1).values
            kept = top.isfinite()
            return top.masked_fill(~kept, 0.0).sum(-1) / kept.sum(-1).clamp_min(1)
        total = (per_span * in_span).sum(-1)
        return total if self.reduce == "sum" else total / in_span.sum(-1).clamp_min(1)


def calibration_of(scorers: Iterable[SpanScorer]) -> str | None:
    """The content-free answer the scorers subtract (one for all of them), or None."""
    texts = {text for scorer in scorers if (text := getattr(scorer, "calibration", None)) is not None}
    if len(texts) > 1:
        raise ValueError(f"span scorers computed together need one calibration answer, got {sorted(texts)}")
    return texts.pop() if texts else None


class _PriorReducer:
    """The attention a content-free answer gives each prompt key: `[H, P]` per layer, mean over its rows."""

    def __init__(self, n_prompt: int) -> None:
        self.n_prompt = n_prompt
        self.priors: dict[int, torch.Tensor] = {}

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        block = SpanBlock(
            logits=logits,
            visible=step.visible,
            context_keys=torch.empty(0, dtype=torch.long),
            answer_keys=torch.empty(0, dtype=torch.long),
            spans=SpanIndex.from_ranges([[0]]),
            scaling=step.scaling,
            softcap=step.softcap,
        )
        self.priors[step.layer_idx] = block.attention()[0, :, :, : self.n_prompt].mean(1)


def prompt_priors(
    model: PreTrainedModel, tokenizer: TokenizerLike, cache: DynamicCache, n_prompt: int, calibration: str
) -> dict[int, torch.Tensor]:
    """Per layer, `[H, n_prompt]` attention of the content-free answer to every prompt key, run over
    `cache` (the prompt's; it is extended, so pass a copy)."""
    ids = tokenizer(calibration, add_special_tokens=False)["input_ids"]
    reducer = _PriorReducer(n_prompt)
    with LogitCapture(model, reducer, query_positions=slice(n_prompt, None)):
        model(
            torch.tensor([ids], device=model.device),
            **cache_argument(model, cache),
            use_cache=True,
            logits_to_keep=1,
        )
    return reducer.priors


def unit_head_scores(
    statistics: LayerRC | LayerSuperiority, membership: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The head scores of each output unit alone, `[U, H]` each, from its rows `membership [U, A]`.

    A unit's score pools the pairs of its own rows (X = X(p_ctx, unit)) against the answer's Y(g, g), so
    the per-unit and whole-answer scores are on one scale (all three kinds from a [`LayerRC`][rcattr.heads.scores.LayerRC],
    `superiority` from a [`LayerSuperiority`][rcattr.heads.scores.LayerSuperiority]).
    """
    rows = membership.to(statistics.row_below.dtype)
    pairs = (rows @ statistics.row_pairs.to(rows.dtype)).clamp_min(1)[:, None]  # [U, 1]
    scores = {"superiority": rows @ statistics.row_below.T / pairs}
    if isinstance(statistics, LayerRC):
        rc = rows @ (statistics.context_rc * statistics.row_pairs).T / pairs  # [U, H]
        scores["rc_std"] = rc / statistics.y_std.clamp_min(torch.finfo(rc.dtype).tiny)
        scores["rc"] = rc
    return scores


@dataclass(frozen=True)
class UnitHeadSelection(HeadSelection):
    """A [`HeadSelection`][rcattr.heads.selection.HeadSelection] with the heads chosen for each output unit from its own
    head scores (`heads` serve the whole answer).

    Attributes
    ----------
    unit_heads : Tensor of long, shape [U, k, 2]
        Padded with (0, 0) at weight 0 where units select different numbers of heads.
    unit_weights : Tensor, shape [U, k]
    """

    unit_heads: torch.Tensor | None = None
    unit_weights: torch.Tensor | None = None


def margin_weights(selection: HeadSelection) -> HeadSelection:
    """The selection with each head weighted by how far its P(X > Y) exceeds 1/2, the data-free point
    where it stops favouring the context over the answer itself; heads at or below 1/2 weigh 0. If no
    selected head exceeds 1/2, the weights are equal."""
    heads = selection.heads
    margin = (selection.scores[heads[:, 0], heads[:, 1]] - 0.5).clamp_min(0)
    return replace(selection, weights=margin if bool((margin > 0).any()) else torch.ones_like(margin))


def per_unit_selection(
    selection: HeadSelection,
    heads: HeadSelector,
    unit_scores: torch.Tensor,
    weighting: HeadWeighting,
    reach: torch.Tensor | None = None,
) -> UnitHeadSelection:
    """`selection` with each output unit's own heads, chosen by `heads` from its `[L, H, U]` scores (among
    the heads that see the context by the `[L]` reach)."""
    per_unit = []
    for scores in unit_scores.unbind(-1):
        chosen = heads.select(scores, reach)
        chosen = margin_weights(chosen) if weighting == "margin" else chosen
        weights = torch.ones(len(chosen.heads)) if chosen.weights is None else chosen.weights
        per_unit.append((chosen.heads, weights))
    width = max(len(unit_heads) for unit_heads, _ in per_unit)  # outliers differ in number: pad, weight 0
    unit_heads = torch.zeros(len(per_unit), width, 2, dtype=torch.long)
    unit_weights = torch.zeros(len(per_unit), width, dtype=unit_scores.dtype)
    for unit, (chosen_heads, weights) in enumerate(per_unit):
        unit_heads[unit, : len(chosen_heads)] = chosen_heads.cpu()
        unit_weights[unit, : len(chosen_heads)] = weights.cpu()
    fields_of = {f.name: getattr(selection, f.name) for f in fields(selection)}
    return UnitHeadSelection(**fields_of, unit_heads=unit_heads, unit_weights=unit_weights)
