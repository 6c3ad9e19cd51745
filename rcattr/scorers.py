"""Span scorers: how much each context span contributes to an output unit, per head.

Each scorer is a small dataclass with one method, ``score(block) -> [U, H, n_spans]`` (kvpress's
``ScorerPress`` pattern). The attributor sums the scores of the selected heads and normalises them
over spans (RCStat Eq. 7). To add a scorer: subclass :class:`SpanScorer`, implement ``score``, and
add it to :data:`SPAN_SCORERS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import torch

from rcattr.spans import SpanBlock
from rcattr.stats import overlap_bounds, phi


class SpanScorer(ABC):
    """Scores context spans for output units from one layer's logits."""

    name: ClassVar[str] = ""

    @abstractmethod
    def score(self, block: SpanBlock) -> torch.Tensor:
        """Non-negative span scores of shape ``[U, H, n_spans]`` for the ``U`` units of ``block``."""


@dataclass
class RCScorer(SpanScorer):
    """Expected relative contextualization E[Z(P_i, G')] (RCStat §3, DESIGN §2 step 2).

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
        index, in_span = block.spans.padded  # [S, W]
        cross, visible = block.cross  # [U, H, R, C], [U, 1, R, C]
        y, y_mask = block.self_sample
        x = cross[..., index].transpose(2, 3).flatten(3)  # [U, H, S, R * W]
        x_mask = (visible[..., index] & in_span).transpose(2, 3).flatten(3)  # [U, 1, S, R * W]
        empty = ~x_mask.any(-1, keepdim=True)  # spans the unit cannot see (sliding window)
        x_mask = x_mask | (empty & (torch.arange(x_mask.shape[-1], device=x.device) == 0))
        _, upper = overlap_bounds(
            x, y[:, :, None], x_mask=x_mask, y_mask=y_mask[:, :, None], dtype=self.dtype
        )
        return upper.masked_fill(empty[..., 0], 0.0)


@dataclass
class AttentionScorer(SpanScorer):
    """Post-softmax attention mass from the unit's rows to each span, averaged over the rows.

    With RC head selection this is the paper's "standard attention-based attribution enhanced by
    RC head selection" (RCStat §5.2). The softmax runs over every key the row sees, exactly as the
    model's own, so the mass of a span is the share of the row's attention it receives.
    """

    name: ClassVar[str] = "attention"

    def score(self, block: SpanBlock) -> torch.Tensor:
        mass = block.attention().index_select(-1, block.context_keys)  # [U, H, R, C]
        rows = block.visible.any(-1).sum(-1).to(mass.dtype)  # [U]
        return block.spans.sum(mass.sum(2) / rows[:, None, None])


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
