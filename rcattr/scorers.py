"""Span scorers: how much each context span contributes to an output unit, per head.

Each scorer is a small dataclass with one method, ``score(block) -> [U, H, n_spans]`` (kvpress's
``ScorerPress`` pattern). The attributor sums the scores of the selected heads and normalises them
over spans (RCStat Eq. 7). To add a scorer: subclass :class:`SpanScorer`, implement ``score``, and
add it to :data:`SPAN_SCORERS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from rcattr.spans import SpanBlock, SpanIndex, continuation_weights
from rcattr.stats import overlap_bounds, phi


class SpanScorer(ABC):
    """Scores context spans for output units from one layer's logits.

    A scorer that pools each unit's rows into one sample (``pools_rows``, the default, as RC
    expectation and its bound do) gets one padded row set per unit. One that averages over rows
    (``pools_rows = False``, the attention scorer) gets every answer row once, with each unit's
    rows in :attr:`SpanBlock.unit_rows`, so that a row shared by several units (a token and the
    continuation of the token before it) is computed once. Either way ``block.n_units`` is ``U``.
    """

    name: ClassVar[str] = ""
    pools_rows: ClassVar[bool] = True

    @abstractmethod
    def score(self, block: SpanBlock) -> torch.Tensor:
        """Non-negative span scores of shape ``[U, H, n_spans]`` for the ``U`` units of ``block``."""


@dataclass
class RCScorer(SpanScorer):
    """Expected relative contextualization E[Z(P_i, G')] (RCStat §3, docs/design.md §2 step 3).

    X = X(P_i, G'), the logits from the unit's rows to the span's tokens, and Y = Y(g, G'), the
    unit's rows to the answer tokens they see. Exact: the block mean of ``phi_Y`` over X.

    Parameters
    ----------
    dtype : torch.dtype, default torch.float64
        Accumulation dtype of the statistics.
    """

    dtype: torch.dtype = torch.float64
    name: ClassVar[str] = "rc"

    def score(self, block: SpanBlock) -> torch.Tensor:
        cross, visible = block.cross  # [U, H, R, C], [U, 1, R, C]
        y, y_mask = block.self_sample  # [U, H, R * A], [U, 1, R * A]
        per_x = phi(cross.flatten(2), y, y_mask=y_mask, dtype=self.dtype).view(cross.shape)
        total = (per_x * visible).sum(2)  # [U, H, C]
        count = visible.sum(2).to(total.dtype).expand_as(total)
        return block.spans.mean(total, count)


@dataclass
class RCBoundScorer(SpanScorer):
    """The upper bound A on E[Z(P_i, G')] valid for every coupling (RCStat Thm 3.1).

    The paper's choice for long generations, where it ranks spans like E[Z] at a lower cost in
    its pair-by-pair setting (here E[Z] is exact and cheaper; the bound is offered for fidelity).

    Parameters
    ----------
    dtype : torch.dtype, default torch.float64
        Accumulation dtype of the statistics.
    """

    dtype: torch.dtype = torch.float64
    name: ClassVar[str] = "rc_bound"

    def score(self, block: SpanBlock) -> torch.Tensor:
        cross, visible = block.cross  # [U, H, R, C], [U, 1, R, C]
        y, y_mask = block.self_sample
        out = torch.zeros((*cross.shape[:2], block.spans.n_spans), dtype=self.dtype, device=cross.device)
        # spans of similar length together: padding each to the longest of all costs |spans| x longest
        for spans, index, in_span in block.spans.by_width():  # [s], [s, W], [s, W]
            x = cross[..., index].transpose(2, 3).flatten(3)  # [U, H, s, R * W]
            x_mask = (visible[..., index] & in_span).transpose(2, 3).flatten(3)  # [U, 1, s, R * W]
            empty = ~x_mask.any(-1, keepdim=True)  # spans the unit cannot see (sliding window)
            x_mask = x_mask | (empty & (torch.arange(x_mask.shape[-1], device=x.device) == 0))
            _, upper = overlap_bounds(
                x, y[:, :, None], x_mask=x_mask, y_mask=y_mask[:, :, None], dtype=self.dtype
            )
            out[..., spans] = upper.masked_fill(empty[..., 0], 0.0)
        return out


SpanReduce = Literal["sum", "mean", "top"]


@dataclass
class AttentionScorer(SpanScorer):
    """Post-softmax attention mass from the unit's rows to each span, averaged over the rows.

    With RC head selection this is the paper's "standard attention-based attribution enhanced by
    RC head selection" (RCStat §5.2). The softmax runs over every key the row sees, exactly as the
    model's own, so the mass of a span is the share of the row's attention it receives. A
    content-free prior (:attr:`SpanBlock.prior`) is subtracted per token, clamped at 0, before
    the span reduction.

    Parameters
    ----------
    continuation : float in [0, 1), default 0.8
        Weight of the answer rows after the unit, up to the end of its sentence: the row ``d``
        tokens after its last token counts ``continuation ** d`` (its own rows count 1). Right after
        a copied or paraphrased span the model still reads the source it came from, so these rows
        carry the unit's evidence on; a new sentence may draw on another source, so it does not
        count. 0 keeps the unit's own rows only (the paper).
    reduce : {"sum", "mean", "top"}, default "sum"
        A span's score from its tokens' mass: the total; the mean (length-normalised); or the mean
        of its ``top_m`` largest (AttnTrace's top-K averaging, insensitive to span length).
    top_m : int, default 5
        Tokens kept per span by ``reduce="top"``.
    skip_first : bool, default False
        Leave out each span's first token, where attention sinks and format tokens sit.
    calibration : str, optional
        A content-free answer (e.g. ``"N/A"``). The attributor runs it after the prompt, reusing the
        prompt's KV cache (its cost is its own few tokens), and the attention it gives each context
        token is subtracted, clamped at 0, before the spans are scored: what a span receives anyway
        does not count (the calibration of ICR and QRHead).
    """

    continuation: float = 0.8
    reduce: SpanReduce = "sum"
    top_m: int = 5
    skip_first: bool = False
    calibration: str | None = None
    name: ClassVar[str] = "attention"
    pools_rows: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not 0 <= self.continuation < 1:
            raise ValueError(f"continuation={self.continuation} must be in [0, 1)")
        if self.reduce not in ("sum", "mean", "top"):
            raise ValueError(f"reduce={self.reduce!r}; choose 'sum', 'mean' or 'top'")
        if self.top_m < 1:
            raise ValueError(f"top_m={self.top_m} must be at least 1")
        if self.calibration is not None and not self.calibration.strip():
            raise ValueError("calibration is an empty answer; give a content-free answer such as 'N/A'")

    def score(self, block: SpanBlock) -> torch.Tensor:
        mass = block.attention().index_select(-1, block.context_keys)  # [U, H, R, C]
        if self.calibration is not None:
            if block.prior is None:
                raise ValueError(
                    "a calibrated scorer needs the prior of its content-free answer in the block"
                )
            prior = block.prior.index_select(-1, block.context_keys).to(mass.dtype)  # [H, C]
            mass = (mass - prior[:, None]).clamp_min(0)
        if block.unit_rows is not None:
            weights = continuation_weights(block.unit_rows, self.continuation, block.row_sentence)
            weights = weights.to(mass.dtype)
            tokens = torch.einsum("ur,hrc->uhc", weights / weights.sum(-1, keepdim=True), mass[0])
        else:
            rows = block.visible.any(-1).sum(-1).to(mass.dtype)  # [U]
            tokens = mass.sum(2) / rows[:, None, None]  # [U, H, C]
        return self._reduce(tokens, block.spans)

    def _reduce(self, tokens: torch.Tensor, spans: SpanIndex) -> torch.Tensor:
        """``[U, H, C]`` token masses to ``[U, H, n_spans]``."""
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


SPAN_SCORERS: dict[str, type[SpanScorer]] = {
    "rc": RCScorer,
    "rc_bound": RCBoundScorer,
    "attention": AttentionScorer,
}


def make_span_scorer(spec: str | SpanScorer) -> SpanScorer:
    """A scorer from its name (``"rc"``, ``"rc_bound"``, ``"attention"``) or the scorer itself."""
    if isinstance(spec, SpanScorer):
        return spec
    if spec not in SPAN_SCORERS:
        raise ValueError(
            f"unknown span_scorer {spec!r}; choose one of {sorted(SPAN_SCORERS)} or pass a SpanScorer"
        )
    return SPAN_SCORERS[spec]()
