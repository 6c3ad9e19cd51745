"""The exact statistics (rcattr.stats.exact): phi, E[max(X - Y, 0)] and P(X > Y) against brute force, dtypes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rcattr.stats import (
    expected_rc,
    overlap_bounds,
    phi,
    probability_of_superiority,
)
from tests.helpers.samples import SETTINGS, as_tensor, pairs, tolerance
from tests.reference.stats import brute_bounds, brute_phi, brute_rc, brute_superiority


@SETTINGS
@given(pairs(), st.booleans())
def test_expected_rc_matches_pairwise_mean(xy: tuple[np.ndarray, np.ndarray], reverse: bool) -> None:
    x, y = xy
    got = expected_rc(as_tensor(x), as_tensor(y), reverse=reverse)
    assert got.shape == () and got.dtype == torch.float64
    assert math.isclose(got.item(), brute_rc(x, y, reverse), rel_tol=1e-5, abs_tol=tolerance(x, y))


@SETTINGS
@given(pairs(), st.booleans())
def test_phi_matches_per_x_brute_force(xy: tuple[np.ndarray, np.ndarray], reverse: bool) -> None:
    x, y = xy
    got = phi(as_tensor(x), as_tensor(y), reverse=reverse).numpy()
    assert got.shape == x.shape
    np.testing.assert_allclose(got, brute_phi(x, y, reverse), rtol=1e-5, atol=tolerance(x, y))


@SETTINGS
@given(pairs())
def test_probability_of_superiority_matches_brute_force(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = xy
    got = probability_of_superiority(as_tensor(x), as_tensor(y)).item()
    assert got == pytest.approx(brute_superiority(x, y), abs=1e-12)


@SETTINGS
@given(pairs())
def test_reverse_identity(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = xy
    fwd = expected_rc(as_tensor(x), as_tensor(y)).item()
    rev = expected_rc(as_tensor(x), as_tensor(y), reverse=True).item()
    assert math.isclose(fwd - rev, x.mean() - y.mean(), rel_tol=1e-7, abs_tol=tolerance(x, y))
    # swapping the samples is the same as reversing
    assert math.isclose(
        rev, expected_rc(as_tensor(y), as_tensor(x)).item(), rel_tol=1e-9, abs_tol=tolerance(x, y)
    )


def test_hand_computed_example() -> None:
    x = torch.tensor([1.0, 2.0, 3.0])
    y = torch.tensor([2.0])
    assert phi(x, y).tolist() == [0.0, 0.0, 1.0]
    assert phi(x, y, reverse=True).tolist() == [1.0, 0.0, 0.0]
    assert expected_rc(x, y).item() == pytest.approx(1 / 3)
    assert probability_of_superiority(x, y).item() == pytest.approx(1 / 3)  # 2 > 2 is False
    lo, up = overlap_bounds(x, y)  # a one-point Y admits a single coupling
    assert lo.item() == pytest.approx(1 / 3) and up.item() == pytest.approx(1 / 3)


@pytest.mark.parametrize("in_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_low_precision_inputs(in_dtype: torch.dtype, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(2, 300, generator=g) + 0.5).to(in_dtype)
    y = torch.randn(2, 120, generator=g).to(in_dtype)
    xs, ys = x.double().numpy(), y.double().numpy()  # exactly the values the function sees
    e = expected_rc(x, y, dtype=dtype)
    er = expected_rc(x, y, dtype=dtype, reverse=True)
    lo, up = overlap_bounds(x, y, dtype=dtype)
    ps = probability_of_superiority(x, y, dtype=dtype)
    assert e.dtype == er.dtype == lo.dtype == up.dtype == ps.dtype == dtype
    rtol = 1e-5 if dtype == torch.float32 else 1e-12
    for i in range(2):
        assert e[i].item() == pytest.approx(brute_phi(xs[i], ys[i]).mean(), rel=rtol)
        assert er[i].item() == pytest.approx(brute_phi(xs[i], ys[i], reverse=True).mean(), rel=rtol)
        blo, bup = brute_bounds(xs[i], ys[i])
        assert lo[i].item() == pytest.approx(blo, rel=rtol, abs=1e-6)
        assert up[i].item() == pytest.approx(bup, rel=rtol)
        assert ps[i].item() == pytest.approx(brute_superiority(xs[i], ys[i]), rel=rtol)


@pytest.mark.parametrize("reverse", [False, True])
def test_float32_accumulation_with_large_shared_offset(reverse: bool) -> None:
    """Logits sharing a large offset must not cancel catastrophically in float32."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4000, generator=g) + 1e4
    y = torch.randn(1500, generator=g) + 1e4 - 0.3
    ref = brute_phi(x.double().numpy(), y.double().numpy(), reverse=reverse)
    got = expected_rc(x, y, dtype=torch.float32, reverse=reverse).item()
    assert got == pytest.approx(ref.mean(), rel=1e-5)
    # per element, where rounding errors cannot average out
    got_phi = phi(x, y, dtype=torch.float32, reverse=reverse).double().numpy()
    np.testing.assert_allclose(got_phi, ref, rtol=1e-4, atol=1e-5)
