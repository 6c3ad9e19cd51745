"""Synthetic claims for the support probe's tests."""

from __future__ import annotations

import numpy as np

from rcattr.grounding.probe import ClaimFeatures


def synthetic_claims(
    n: int, seed: int, shape: tuple[int, int] = (2, 3)
) -> tuple[list[ClaimFeatures], np.ndarray]:
    """``n`` claims whose first head's lookback and coverage tell their label, the rest noise."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    claims = []
    for label in labels:
        lookback = rng.uniform(0, 1, shape)
        lookback[0, 0] = 0.3 + 0.4 * label + rng.normal(0, 0.1)
        coverage = float(np.clip(0.5 + 0.3 * label + rng.normal(0, 0.2), 0, 1))
        claims.append(
            ClaimFeatures(
                lookback,
                rng.uniform(0, 1, shape),
                float(rng.uniform(0.01, 0.99)),
                -1.0,
                coverage,
                bool(rng.random() < 0.1),
                bool(rng.random() < 0.2),
            )
        )
    return claims, labels
