"""How well a predictor ranks keys as its teacher does: the rank correlation of predicted and replay scores per
key head, and the share of the teacher's kept set a predictor keeps at a compression ratio."""

from __future__ import annotations

import torch

__all__ = ["RATIOS", "kept_overlap", "spearman"]

RATIOS = (0.5, 0.75, 0.875)  # the compressions the issue measures


def _ranks(scores: torch.Tensor) -> torch.Tensor:
    return scores.argsort(-1).argsort(-1).double()


def spearman(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """`[k]` Spearman correlation of `predicted` and `target [k, n]` along the last dimension."""
    a, b = _ranks(predicted), _ranks(target)
    a, b = a - a.mean(-1, keepdim=True), b - b.mean(-1, keepdim=True)
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-12)


def kept_overlap(predicted: torch.Tensor, target: torch.Tensor, ratio: float) -> torch.Tensor:
    """`[k]` the share of the `(1 - ratio) · n` top keys of `target [k, n]` that the top keys of
    `predicted` include (chance: `1 - ratio`)."""
    keep = max(1, int(target.shape[-1] * (1.0 - ratio)))
    chosen = torch.zeros_like(predicted, dtype=torch.bool).scatter_(
        -1, predicted.topk(keep, -1).indices, True
    )
    wanted = torch.zeros_like(target, dtype=torch.bool).scatter_(-1, target.topk(keep, -1).indices, True)
    return (chosen & wanted).sum(-1).double() / keep
