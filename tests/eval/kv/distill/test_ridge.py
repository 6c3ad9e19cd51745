"""Ridge from sufficient statistics (rcattr.eval.kv.distill.ridge) against least squares: the fit, the error
following from the statistics, folds subtracting, and the cross-validated penalty."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.eval.kv.distill.ridge import RidgeStatistics, choose_penalty


def _samples(seed: int, n: int, d: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=generator, dtype=torch.float64) * torch.linspace(
        0.1, 10, d, dtype=torch.float64
    )
    y = x @ torch.randn(d, k, generator=generator, dtype=torch.float64) + 3.0
    return x, y + 0.1 * torch.randn(n, k, generator=generator, dtype=torch.float64)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(20, 60), st.integers(1, 6), st.integers(1, 3))
def test_ridge_without_penalty_is_least_squares_and_its_error_follows_from_the_statistics(
    seed, n, d, k
) -> None:
    x, y = _samples(seed, n, d, k)
    statistics = RidgeStatistics.empty(d, k)
    statistics.add(x[: n // 2], y[: n // 2])
    statistics.add(x[n // 2 :], y[n // 2 :])
    weight, bias = statistics.solve(0.0)
    design = np.hstack([x.numpy(), np.ones((n, 1))])
    solution = np.linalg.lstsq(design, y.numpy(), rcond=None)[0]
    np.testing.assert_allclose(weight.numpy(), solution[:-1], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(bias.numpy(), solution[-1], rtol=1e-6, atol=1e-8)
    error = float(((x @ weight + bias - y) ** 2).sum())
    assert statistics.squared_error(weight, bias) == pytest.approx(error, rel=1e-6, abs=1e-8)


def test_a_penalty_shrinks_the_standardised_weights_and_folds_subtract() -> None:
    x, y = _samples(1, 200, 5, 2)
    statistics = RidgeStatistics.empty(5, 2)
    statistics.add(x, y)
    scale = x.std(0, unbiased=False)[:, None]
    norms = [float((statistics.solve(p)[0] * scale).norm()) for p in (0.0, 0.1, 10.0)]
    assert norms[0] > norms[1] > norms[2]
    first, second = RidgeStatistics.empty(5, 2), RidgeStatistics.empty(5, 2)
    first.add(x[:80], y[:80])
    second.add(x[80:], y[80:])
    torch.testing.assert_close((statistics - first).gram, second.gram)
    torch.testing.assert_close((first + second).cross, statistics.cross)


def test_cross_validation_picks_a_small_penalty_for_a_clean_signal_and_a_large_one_for_noise() -> None:
    generator = torch.Generator().manual_seed(0)
    clean, noise = [], []
    for _ in range(4):
        x = torch.randn(30, 20, generator=generator, dtype=torch.float64)
        statistics = RidgeStatistics.empty(20, 1)
        statistics.add(x, x[:, :1] * 2.0)
        clean.append(statistics)
        statistics = RidgeStatistics.empty(20, 1)
        statistics.add(x, torch.randn(30, 1, generator=generator, dtype=torch.float64))
        noise.append(statistics)
    assert choose_penalty(clean, (1e-4, 1.0, 100.0)) == 1e-4
    assert choose_penalty(noise, (1e-4, 1.0, 100.0)) == 100.0
