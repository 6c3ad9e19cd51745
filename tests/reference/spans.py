"""Brute-force references for the span scorers over :mod:`tests.helpers.blocks`' answer block."""

from __future__ import annotations

import torch

from rcattr.attribution.spans import SpanBlock
from tests.helpers.blocks import CONTEXT_KEYS


def brute_mass(block: SpanBlock, weights: torch.Tensor, prior: torch.Tensor | None = None) -> torch.Tensor:
    """``[U, H, C]`` weighted mean over rows of each context token's attention (minus ``prior [H, K]``)."""
    out = torch.zeros(weights.shape[0], 3, 3, dtype=torch.float64)
    for unit in range(weights.shape[0]):
        for head in range(3):
            for row in range(4):
                scores = (block.logits[0, head, row] * 0.5).masked_fill(~block.visible[0, row], float("-inf"))
                mass = torch.softmax(scores, -1)[CONTEXT_KEYS]
                if prior is not None:
                    mass = (mass - prior[head, CONTEXT_KEYS]).clamp_min(0)
                out[unit, head] += weights[unit, row] * mass / weights[unit].sum()
    return out
