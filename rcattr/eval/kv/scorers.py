"""Scoring choices the KV benchmark measured and left out of [`WindowScorer`][rcattr.kvcache.scoring.WindowScorer]
(docs/benchmarks/kv-cache.md, "Levers"): kept here so that their rows reproduce (`--rc-variants upper_bound`,
`benchmarks/bench_kv_fidelity.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from rcattr.kvcache import DistilledScorer, WindowScorer
from rcattr.kvcache.scoring import expected_rc, split_window
from rcattr.stats import overlap_bounds, phi

__all__ = ["AblationScorer", "BlendedScorer", "MaxPooledScorer", "QueryMaxScorer", "SoftmaxMaxScorer"]


@dataclass(frozen=True)
class AblationScorer(WindowScorer):
    """A [`WindowScorer`][rcattr.kvcache.scoring.WindowScorer] with the statistic and the query-head aggregation open.

    Parameters
    ----------
    statistic : {"expected", "upper_bound"}, default "expected"
        `E[max(X - Y, 0)]` under the product coupling, or the paper's bound
        `A = ∫ min(F_Y, 1 - F_X) dt` of it that holds for every coupling (RCStat Thm 3.1).
    group_reduce : {"mean", "max"}, default "mean"
        How a key head aggregates the scores of the query heads that read it.
    """

    statistic: Literal["expected", "upper_bound"] = "expected"
    group_reduce: Literal["mean", "max"] = "mean"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.statistic not in ("expected", "upper_bound"):
            raise ValueError(f"statistic must be 'expected' or 'upper_bound', got {self.statistic!r}")
        if self.group_reduce not in ("mean", "max"):
            raise ValueError(f"group_reduce must be 'mean' or 'max', got {self.group_reduce!r}")

    def key_head_scores(self, logits: torch.Tensor, visible: torch.Tensor, kv_heads: int) -> torch.Tensor:
        """`[B, kv_heads, m]` the statistic of every key before the window, `nan` where no window query
        sees it (the shapes of [`window_rc_scores`][rcattr.kvcache.scoring.window_rc_scores])."""
        batch, heads, w, n = logits.shape
        if heads % kv_heads:
            raise ValueError(f"{heads} query heads cannot share {kv_heads} key heads evenly")
        split = split_window(logits, visible)
        if self.statistic == "expected":
            score = expected_rc(split, self.dtype)
        else:  # keys no window query sees get a dummy sample and are set to nan below
            _, score = overlap_bounds(
                split.cross.view(batch, heads, n - w, w),
                split.own[:, :, None],
                x_mask=split.cross_visible | (split.seen_by == 0)[..., None],
                y_mask=split.own_visible[:, :, None],
                dtype=self.dtype,
            )
        grouped = score.view(batch, kv_heads, heads // kv_heads, n - w)
        reduced = grouped.mean(2) if self.group_reduce == "mean" else grouped.amax(2)
        return reduced.masked_fill(split.seen_by == 0, float("nan"))


@dataclass(frozen=True)
class _MaxOverQueries(WindowScorer):
    """A key's score is the max over the window queries and its key head's query heads of a per-query value."""

    replayable: ClassVar[bool] = True

    def key_head_scores(self, logits: torch.Tensor, visible: torch.Tensor, kv_heads: int) -> torch.Tensor:
        """`[B, kv_heads, m]` from `[B, H, w, m + w]` logits (the shapes of
        [`window_rc_scores`][rcattr.kvcache.scoring.window_rc_scores]); `nan` where no window query sees a key."""
        batch, heads, w, n = logits.shape
        if heads % kv_heads:
            raise ValueError(f"{heads} query heads cannot share {kv_heads} key heads evenly")
        score = self.query_head_scores(logits, visible)
        grouped = score.view(batch, kv_heads, heads // kv_heads, n - w).amax(2)
        return grouped.masked_fill(~visible[:, None, :, : n - w].any(-2), float("nan"))

    def query_head_scores(self, logits: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """`[B, H, m]` every query head's score of every key before the window (any value where none sees it)."""
        raise NotImplementedError


@dataclass(frozen=True)
class MaxPooledScorer(_MaxOverQueries):
    """Each key's expected RC against the window, pooled by the **max** over the window queries and the query
    heads of its key head instead of the mean: a key one query needs counts as much as one all of them read.

    The reference sample Y is the own causal logits of the window's last `reference` queries. As
    `phi_Y` increases with its argument, the max of `phi_Y` over queries is `phi_Y` of the largest logit.

    Parameters
    ----------
    reference : int, default 16
        The window's last queries whose logits on each other form Y (all of a shorter window).
    """

    reference: int = 16

    def query_head_scores(self, logits: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        batch, heads, w, n = logits.shape
        context, r = n - w, min(self.reference, w)
        cross_visible = visible[:, None, :, :context]
        top = logits[..., :context].masked_fill(~cross_visible, float("-inf")).amax(-2)
        own = logits[..., w - r :, n - r :].reshape(batch, heads, r * r)
        own_visible = visible[:, None, w - r :, n - r :].reshape(batch, 1, r * r)
        return phi(torch.where(cross_visible.any(-2), top, 0.0), own, y_mask=own_visible, dtype=self.dtype)


@dataclass(frozen=True)
class QueryMaxScorer(_MaxOverQueries):
    """Each key's RC for each window query against **that query's own** logits (`phi_{Y_j}(x_ij)`, Y_j the
    query's logits on every key it sees before the window), pooled by the max over the queries and the query
    heads of the key's head: KVzip's max over a replay's queries, with RC in place of the softmax.

    Only each query's `top` largest logits are scored (a key no query has among its `top` scores 0):
    for those, `#{y < x}` and `sum_{y < x} y` follow from the query's sum and its top values, so the
    statistic is exact there at the cost of one top-k per query.

    Parameters
    ----------
    top : int, default 32
        The keys each query scores.
    """

    top: int = 32

    def query_head_scores(self, logits: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        batch, heads, w, n = logits.shape
        context = n - w
        cross = logits[..., :context].to(self.dtype)
        cross_visible = visible[:, None, :, :context]
        count = cross_visible.sum(-1, keepdim=True).clamp_min(1)  # [B, 1, w, 1]
        total = cross.masked_fill(~cross_visible, 0.0).sum(-1, keepdim=True)  # [B, H, w, 1]
        values, index = cross.masked_fill(~cross_visible, float("-inf")).topk(min(self.top, context), dim=-1)
        rank = torch.arange(1, values.shape[-1] + 1, device=values.device, dtype=values.dtype)
        real = values > float("-inf")
        above = values.masked_fill(~real, 0.0).cumsum(-1)  # the sum of the values >= each one
        per_query = (values * (count - rank) - (total - above)) / count  # phi_{Y_j} at each of its top values
        per_query = per_query.masked_fill(~real, 0.0).clamp_min(0.0)
        return cross.new_zeros(batch, heads, context).scatter_reduce(
            -1, index.flatten(-2), per_query.flatten(-2), reduce="amax"
        )


@dataclass(frozen=True)
class SoftmaxMaxScorer(_MaxOverQueries):
    """KVzip's statistic: each key's largest attention weight (`softmax(scale · logits)`) over the window
    queries and the query heads of its key head; with a replay as the window, KVzip's score. It tells the
    probe's effect from the statistic's beside [`QueryMaxScorer`][rcattr.eval.kv.scorers.QueryMaxScorer].

    Parameters
    ----------
    scale : float, default 1.0
        The model's attention scaling (`1 / sqrt(head_dim)` for most), applied to the raw logits.
    """

    scale: float = 1.0

    def query_head_scores(self, logits: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        context = logits.shape[-1] - logits.shape[-2]
        weights = (
            (logits.to(self.dtype) * self.scale).masked_fill(~visible[:, None], float("-inf")).softmax(-1)
        )
        return weights[..., :context].nan_to_num(0.0).amax(-2)


@dataclass(frozen=True, eq=False)
class BlendedScorer(DistilledScorer):
    """The distilled replay score and the window's RC score together: each divided by its mean over the layer's
    keys (so neither scale wins), then `(1 - window_share) · distilled + window_share · window`; a key the
    context's end reads and a key a replay would read both stay.

    Parameters
    ----------
    window_share : float, default 0.5
        The window score's weight, in [0, 1] (0: the distilled score alone, up to the scale).
    """

    window_share: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.window_share <= 1.0:
            raise ValueError(f"window_share must be in [0, 1], got {self.window_share!r}")

    def hidden_state_scores(
        self,
        layer: int,
        hidden: torch.Tensor,
        values: torch.Tensor,
        window_scores: Callable[[], torch.Tensor],
    ) -> torch.Tensor:
        distilled, window = super().hidden_state_scores(layer, hidden, values, window_scores), window_scores()

        def relative(scores: torch.Tensor) -> torch.Tensor:
            mean = scores.nan_to_num(0.0).sum((-2, -1), keepdim=True) / (~scores.isnan()).sum(
                (-2, -1), keepdim=True
            ).clamp_min(1)
            return scores / mean.clamp_min(torch.finfo(scores.dtype).tiny)

        return (1.0 - self.window_share) * relative(distilled) + self.window_share * relative(
            window.to(distilled.dtype)
        )
