"""Ridge regression from sufficient statistics: a layer's map is fitted from `Σ x̃ x̃ᵀ`, `Σ x̃ yᵀ` and `Σ y²`
(`x̃ = [x, 1]`), so contexts are added one at a time, a fold is left out by subtraction, and the held-out error
of any penalty follows from the held-out fold's statistics alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["PENALTIES", "RidgeStatistics", "choose_penalty"]

# penalties on the standardised features, times the sample count (a share of each feature's variance)
PENALTIES = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


@dataclass
class RidgeStatistics:
    """The sufficient statistics of a least-squares fit of `y [n, k]` on `x [n, d]` with an intercept.

    Attributes
    ----------
    gram : torch.Tensor
        `[d + 1, d + 1]` float64, `Σ x̃ x̃ᵀ`.
    cross : torch.Tensor
        `[d + 1, k]` float64, `Σ x̃ yᵀ`.
    squares : torch.Tensor
        `[k]` float64, `Σ y²`.
    """

    gram: torch.Tensor
    cross: torch.Tensor
    squares: torch.Tensor

    @classmethod
    def empty(cls, features: int, outputs: int) -> RidgeStatistics:
        dtype = torch.float64
        return cls(
            torch.zeros(features + 1, features + 1, dtype=dtype),
            torch.zeros(features + 1, outputs, dtype=dtype),
            torch.zeros(outputs, dtype=dtype),
        )

    @property
    def count(self) -> float:
        return float(self.gram[-1, -1])

    def add(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Add the samples `x [n, d]`, `y [n, k]`."""
        augmented = torch.cat([x.double(), x.new_ones(x.shape[0], 1, dtype=torch.float64)], dim=1)
        y = y.double()
        self.gram += augmented.T @ augmented
        self.cross += augmented.T @ y
        self.squares += (y * y).sum(0)

    def __add__(self, other: RidgeStatistics) -> RidgeStatistics:
        return RidgeStatistics(self.gram + other.gram, self.cross + other.cross, self.squares + other.squares)

    def __sub__(self, other: RidgeStatistics) -> RidgeStatistics:
        return RidgeStatistics(self.gram - other.gram, self.cross - other.cross, self.squares - other.squares)

    def solve(self, penalty: float) -> tuple[torch.Tensor, torch.Tensor]:
        """`[d, k]` weights and `[k]` bias minimising the squared error plus `penalty · n · |β|²` on the
        standardised features (the intercept unpenalised)."""
        n = self.count
        if n < 2:
            raise ValueError("ridge needs at least two samples")
        d = self.gram.shape[0] - 1
        mean, y_mean = self.gram[:d, d] / n, self.cross[d] / n
        covariance = self.gram[:d, :d] - n * torch.outer(mean, mean)
        cross = self.cross[:d] - n * torch.outer(mean, y_mean)
        scale = (covariance.diagonal() / n).clamp_min(1e-12).sqrt()
        system = covariance / torch.outer(scale, scale)
        system += penalty * n * torch.eye(d, dtype=system.dtype)
        beta = torch.linalg.solve(system, cross / scale[:, None])
        weight = beta / scale[:, None]
        return weight, y_mean - mean @ weight

    def squared_error(self, weight: torch.Tensor, bias: torch.Tensor) -> float:
        """The summed squared error of `x @ weight + bias` on these samples."""
        augmented = torch.cat([weight.double(), bias.double()[None]], dim=0)  # [d + 1, k]
        error = (
            self.squares - 2 * (augmented * self.cross).sum(0) + (augmented * (self.gram @ augmented)).sum(0)
        )
        return float(error.sum())


def choose_penalty(folds: Sequence[RidgeStatistics], penalties: Sequence[float] = PENALTIES) -> float:
    """The penalty of `penalties` with the least squared error summed over `folds`, each predicted by the map
    fitted on the other folds (folds of whole contexts)."""
    total = folds[0]
    for fold in folds[1:]:
        total = total + fold
    errors = []
    for penalty in penalties:
        error = 0.0
        for fold in folds:
            weight, bias = (total - fold).solve(penalty)
            error += fold.squared_error(weight, bias)
        errors.append(error)
    return penalties[min(range(len(penalties)), key=errors.__getitem__)]
