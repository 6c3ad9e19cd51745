"""Scoring choices the KV benchmark measured and left out of :class:`~rcattr.kvcache.WindowScorer`
(docs/benchmarks.md, "Levers"): kept here so that their rows reproduce (``--rc-variants upper_bound``,
``benchmarks/bench_kv_fidelity.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from rcattr.kvcache import WindowScorer
from rcattr.kvcache.scoring import expected_rc, split_window
from rcattr.stats import overlap_bounds

__all__ = ["AblationScorer"]


@dataclass(frozen=True)
class AblationScorer(WindowScorer):
    """A :class:`~rcattr.kvcache.WindowScorer` with the statistic and the query-head aggregation open.

    Parameters
    ----------
    statistic : {"expected", "upper_bound"}, default "expected"
        ``E[max(X - Y, 0)]`` under the product coupling, or the paper's bound
        ``A = ∫ min(F_Y, 1 - F_X) dt`` of it that holds for every coupling (RCStat Thm 3.1).
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
        """``[B, kv_heads, m]`` the statistic of every key before the window, ``nan`` where no window query
        sees it (the shapes of :func:`~rcattr.kvcache.window_rc_scores`)."""
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
