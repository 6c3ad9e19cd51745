"""Brute-force references for :mod:`rcattr.stats` (numpy, float64, Python loops)."""

from __future__ import annotations

import itertools

import numpy as np


def brute_phi(x: np.ndarray, y: np.ndarray, reverse: bool = False) -> np.ndarray:
    """phi(x_i) = mean_j max(x_i - y_j, 0) over all pairs."""
    diff = x[:, None] - y[None, :]
    if reverse:
        diff = -diff
    return np.maximum(diff, 0.0).mean(axis=1)


def brute_rc(x: np.ndarray, y: np.ndarray, reverse: bool = False) -> float:
    """Pairwise mean of max(x_i - y_j, 0) (or max(y_j - x_i, 0))."""
    total = 0.0
    for xi in x:
        for yj in y:
            total += max(yj - xi, 0.0) if reverse else max(xi - yj, 0.0)
    return total / (len(x) * len(y))


def brute_superiority(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) over all pairs."""
    return float(sum(1 for xi in x for yj in y if xi > yj)) / (len(x) * len(y))


def brute_bounds(x: np.ndarray, y: np.ndarray, reverse: bool = False) -> tuple[float, float]:
    """Integrate the bound densities with a Python loop over the distinct union points.

    The CDFs are evaluated at the midpoint of each interval between consecutive distinct
    points, where both are constant (a different route from the right-continuous search).
    """
    if reverse:
        x, y = y, x
    pts = sorted(set(x.tolist()) | set(y.tolist()))
    lower = upper = 0.0
    for a, b in itertools.pairwise(pts):
        m = a + (b - a) / 2.0
        assert a < m < b
        fx = np.mean(x <= m)
        fy = np.mean(y <= m)
        lower += max(fy - fx, 0.0) * (b - a)
        upper += min(fy, 1.0 - fx) * (b - a)
    return lower, upper


def coupled_rc(x: np.ndarray, y_paired: np.ndarray) -> float:
    """E[max(X - Y, 0)] for the one-to-one coupling x_i <-> y_paired_i."""
    return float(np.maximum(x - y_paired, 0.0).mean())
