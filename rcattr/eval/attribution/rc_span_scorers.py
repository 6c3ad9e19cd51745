"""The paper's RC-expectation span scorers: expected RC per span ([`RCScorer`][rcattr.eval.attribution.rc_span_scorers.RCScorer]) and its coupling-free upper
bound ([`RCBoundScorer`][rcattr.eval.attribution.rc_span_scorers.RCBoundScorer]). Both measured below the attention scorer on both dev files (docs/benchmarks/attribution.md,
the ablation's "RC expectation scorer" row), so they live with the benchmark's recipes, not in the public API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from rcattr.attribution.scorers import SpanScorer
from rcattr.attribution.spans import SpanBlock
from rcattr.stats import overlap_bounds, phi


@dataclass
class RCScorer(SpanScorer):
    """Expected relative contextualization E[Z(P_i, G')] (RCStat §3, docs/design.md §2 step 3).

    X = X(P_i, G'), the logits from the unit's rows to the span's tokens, and Y = Y(g, G'), the
    unit's rows to the answer tokens they see. Exact: the block mean of `phi_Y` over X.

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
