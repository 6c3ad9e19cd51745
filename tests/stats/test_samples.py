"""The samples every statistic takes (rcattr.stats._samples): batches, masks, broadcasting, and the inputs refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.stats import (
    expected_rc,
    overlap_bounds,
    phi,
    probability_of_superiority,
)
from tests.helpers.samples import as_tensor, pairs, tolerance
from tests.reference.stats import brute_bounds, brute_rc

_GARBAGE = [float("nan"), float("inf"), float("-inf"), 1e30, -1e30, 0.0]


@st.composite
def ragged_batches(draw: st.DrawFn) -> list[tuple[np.ndarray, np.ndarray]]:
    n_rows = draw(st.integers(1, 4))
    return [draw(pairs()) for _ in range(n_rows)]


def _pad(rows: list[np.ndarray], fill: float, extra: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows) + extra
    vals = torch.full((len(rows), width), fill, dtype=torch.float64)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        vals[i, : len(r)] = as_tensor(r)
        mask[i, : len(r)] = True
    return vals, mask


@settings(deadline=None, max_examples=60)
@given(ragged_batches(), st.sampled_from(_GARBAGE), st.integers(0, 3), st.booleans(), st.randoms())
def test_batched_masked_equals_per_row(
    rows: list[tuple[np.ndarray, np.ndarray]], fill: float, extra: int, reverse: bool, rnd: object
) -> None:
    xv, xm = _pad([r[0] for r in rows], fill, extra)
    yv, ym = _pad([r[1] for r in rows], fill, extra)
    # scatter the valid entries so masked ones are not only at the end
    px = torch.randperm(xv.shape[1], generator=torch.Generator().manual_seed(rnd.randint(0, 99)))  # type: ignore[attr-defined]
    xv, xm = xv[:, px], xm[:, px]

    e = expected_rc(xv, yv, x_mask=xm, y_mask=ym, reverse=reverse)
    lo, up = overlap_bounds(xv, yv, x_mask=xm, y_mask=ym, reverse=reverse)
    ps = probability_of_superiority(xv, yv, x_mask=xm, y_mask=ym)
    ph = phi(torch.where(xm, xv, 0.0), yv, y_mask=ym, reverse=reverse)
    assert e.shape == lo.shape == up.shape == ps.shape == (len(rows),)
    assert ph.shape == xv.shape
    for i, (x, y) in enumerate(rows):
        tx, ty = as_tensor(x), as_tensor(y)
        assert e[i].item() == pytest.approx(
            expected_rc(tx, ty, reverse=reverse).item(), rel=1e-9, abs=tolerance(x, y)
        )
        rlo, rup = overlap_bounds(tx, ty, reverse=reverse)
        assert lo[i].item() == pytest.approx(rlo.item(), rel=1e-9, abs=tolerance(x, y))
        assert up[i].item() == pytest.approx(rup.item(), rel=1e-9, abs=tolerance(x, y))
        assert ps[i].item() == pytest.approx(probability_of_superiority(tx, ty).item(), abs=1e-12)
        ref_phi = phi(xv[i][xm[i]], ty, reverse=reverse)  # valid x in their scattered order
        np.testing.assert_allclose(ph[i][xm[i]].numpy(), ref_phi.numpy(), rtol=1e-9, atol=tolerance(x, y))


def test_leading_dims_broadcast() -> None:
    g = torch.Generator().manual_seed(0)
    layers, heads, nx, ny = 3, 4, 17, 9
    x = torch.randn(layers, heads, nx, generator=g)
    y_shared = torch.randn(layers, 1, ny, generator=g)  # one Y per layer, shared by heads
    x_mask = torch.rand(nx, generator=g) > 0.3  # one mask for every head
    x_mask[0] = True
    e = expected_rc(x, y_shared, x_mask=x_mask)
    lo, up = overlap_bounds(x, y_shared, x_mask=x_mask)
    assert e.shape == lo.shape == up.shape == (layers, heads)
    assert phi(x, y_shared).shape == (layers, heads, nx)
    for li in range(layers):
        for h in range(heads):
            xs, ys = x[li, h][x_mask].double().numpy(), y_shared[li, 0].double().numpy()
            assert e[li, h].item() == pytest.approx(brute_rc(xs, ys), rel=1e-9, abs=1e-12)
            blo, bup = brute_bounds(xs, ys)
            assert lo[li, h].item() == pytest.approx(blo, rel=1e-9, abs=1e-12)
            assert up[li, h].item() == pytest.approx(bup, rel=1e-9, abs=1e-12)


_ALL = [expected_rc, overlap_bounds, probability_of_superiority]


@pytest.mark.parametrize("fn", _ALL + [phi])
def test_empty_samples_rejected(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=r"\bx\b.*empty"):
        fn(torch.zeros(3, 0), torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"\by\b.*empty"):
        fn(torch.zeros(3, 4), torch.zeros(0))


@pytest.mark.parametrize("fn", _ALL)
def test_all_masked_row_rejected(fn) -> None:  # type: ignore[no-untyped-def]
    x, y = torch.randn(5, 6), torch.randn(5, 7)
    xm = torch.ones(5, 6, dtype=torch.bool)
    xm[1] = False
    xm[3] = False
    with pytest.raises(ValueError, match=r"x_mask.*2 of 5 batch"):
        fn(x, y, x_mask=xm)
    ym = torch.ones(5, 7, dtype=torch.bool)
    ym[4] = False
    with pytest.raises(ValueError, match=r"y_mask.*1 of 5 batch"):
        fn(x, y, y_mask=ym)


@pytest.mark.parametrize("fn", _ALL + [phi])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_valid_entries_rejected(fn, bad: float) -> None:  # type: ignore[no-untyped-def]
    x, y = torch.randn(2, 6), torch.randn(2, 7)
    y[1, 3] = bad
    with pytest.raises(ValueError, match=r"\by\b.*non-finite"):
        fn(x, y)
    # ... but the same value is fine once masked out
    ym = torch.ones(2, 7, dtype=torch.bool)
    ym[1, 3] = False
    fn(x, y, y_mask=ym)
    x[0, 0] = bad
    with pytest.raises(ValueError, match=r"\bx\b.*non-finite"):
        fn(x, y, y_mask=ym)


def test_overflow_on_cast_counts_as_non_finite() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        expected_rc(torch.tensor([1e300], dtype=torch.float64), torch.tensor([0.0]), dtype=torch.float32)


@pytest.mark.parametrize("fn", _ALL + [phi])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, "float64"])
def test_bad_accumulation_dtype_rejected(fn, dtype) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="dtype"):
        fn(torch.randn(4), torch.randn(3), dtype=dtype)


@pytest.mark.parametrize("fn", _ALL + [phi])
def test_non_floating_input_rejected(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=r"\bx\b.*floating"):
        fn(torch.arange(4), torch.randn(3))
    with pytest.raises(ValueError, match=r"\by\b.*floating"):
        fn(torch.randn(4), torch.arange(3))


@pytest.mark.parametrize("fn", _ALL)
def test_bad_masks_rejected(fn) -> None:  # type: ignore[no-untyped-def]
    x, y = torch.randn(2, 6), torch.randn(2, 7)
    with pytest.raises(ValueError, match=r"x_mask.*broadcast"):
        fn(x, y, x_mask=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"y_mask.*broadcast"):
        fn(x, y, y_mask=torch.ones(3, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"x_mask.*bool"):
        fn(x, y, x_mask=torch.ones(2, 6))
    with pytest.raises(ValueError, match="broadcast"):
        fn(torch.randn(2, 6), torch.randn(3, 7))
