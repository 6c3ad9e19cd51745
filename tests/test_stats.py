"""Property tests of rcattr.stats against plainly written brute-force references."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.stats import (
    count_below,
    count_below_row_sums,
    expected_rc,
    overlap_bounds,
    phi,
    probability_of_superiority,
    rank_and_phi_row_sums,
)
from tests.helpers.samples import SETTINGS, as_tensor, pairs, tolerance
from tests.reference.stats import brute_bounds, brute_phi, brute_rc, brute_superiority, coupled_rc

# --------------------------------------------------------------------------------------------
# exactness against brute force
# --------------------------------------------------------------------------------------------


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
@given(pairs(), st.booleans())
def test_bounds_match_brute_force_integrals_and_sandwich_e(
    xy: tuple[np.ndarray, np.ndarray], reverse: bool
) -> None:
    x, y = xy
    lo, up = overlap_bounds(as_tensor(x), as_tensor(y), reverse=reverse)
    blo, bup = brute_bounds(x, y, reverse)
    tol = tolerance(x, y)
    assert math.isclose(lo.item(), blo, rel_tol=1e-7, abs_tol=tol)
    assert math.isclose(up.item(), bup, rel_tol=1e-7, abs_tol=tol)
    e = expected_rc(as_tensor(x), as_tensor(y), reverse=reverse).item()
    assert lo.item() - tol <= e <= up.item() + tol


@SETTINGS
@given(pairs(equal_sizes=True), st.randoms(use_true_random=False))
def test_bounds_hold_for_permutation_couplings_and_are_attained(
    xy: tuple[np.ndarray, np.ndarray], rnd: object
) -> None:
    x, y = xy
    lo, up = (v.item() for v in overlap_bounds(as_tensor(x), as_tensor(y)))
    tol = tolerance(x, y)
    perm = list(range(len(y)))
    rnd.shuffle(perm)  # type: ignore[attr-defined]
    e_perm = coupled_rc(x, y[perm])
    assert lo - tol <= e_perm <= up + tol
    # Sharpness: the comonotone pairing attains the lower bound, the antitone the upper.
    assert math.isclose(lo, coupled_rc(np.sort(x), np.sort(y)), rel_tol=1e-7, abs_tol=tol)
    assert math.isclose(up, coupled_rc(np.sort(x), np.sort(y)[::-1]), rel_tol=1e-7, abs_tol=tol)


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


# --------------------------------------------------------------------------------------------
# batching, broadcasting, masks
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# the grid-accelerated exact rank
# --------------------------------------------------------------------------------------------

_values = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, width=32),
    st.integers(-5, 5).map(float),  # ties between x and y, and within y
    st.sampled_from([0.0, -0.0, 1e-30, -1e-30, 3e38, -3e38]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda groups: st.tuples(
            st.lists(st.lists(_values, min_size=1, max_size=40), min_size=groups, max_size=groups),
            st.lists(st.lists(_values, min_size=1, max_size=25), min_size=groups, max_size=groups),
            st.lists(st.integers(0, 24), min_size=groups, max_size=groups),
        )
    ),
    st.sampled_from([torch.float32, torch.float64]),
    st.booleans(),
)
def test_count_below_equals_searchsorted(
    samples: tuple[list[list[float]], list[list[float]], list[int]], dtype: torch.dtype, right: bool
) -> None:
    """Exactly torch.searchsorted's ranks, ties, +inf pads, constant rows and extreme values included."""
    xs, ys, pads = samples
    nx, ny = max(map(len, xs)), max(len(y) + pad for y, pad in zip(ys, pads, strict=True))
    x = torch.tensor([row + [row[0]] * (nx - len(row)) for row in xs], dtype=dtype)
    y = torch.tensor([sorted(row) + [math.inf] * (ny - len(row)) for row in ys], dtype=dtype)
    y = y.sort(-1).values  # float64 -> float32 rounding keeps the order, but sort anyway
    torch.testing.assert_close(count_below(x, y, right=right), torch.searchsorted(y, x, right=right).int())


def test_count_below_on_attention_like_logits_searches_crowded_cells() -> None:
    """Many x against a few thousand y (the attributor's shape): ranks equal searchsorted's exactly."""
    generator = torch.Generator().manual_seed(0)
    y = (torch.randn(3, 2000, generator=generator) * 8).sort(-1).values
    y[:, 1000:1040] = y[:, 1000:1001]  # a run of equal values: a crowded cell, binary-searched
    x = torch.randn(3, 50_000, generator=generator) * 12
    x[:, :10] = y[:, 1000:1001]  # x equal to the run
    for right in (False, True):
        assert torch.equal(count_below(x, y, right=right).long(), torch.searchsorted(y, x, right=right))
    with pytest.raises(ValueError, match="share a dtype"):
        count_below(x.double(), y)


def test_count_below_without_finite_y_or_x() -> None:
    """A row of pads only ranks every x at 0; empty inputs give empty counts."""
    y = torch.tensor([[1.0, math.inf], [math.inf, math.inf]])
    x = torch.tensor([[0.0, 2.0, 1.0], [0.0, 5.0, -5.0]])
    assert count_below(x, y, right=True).tolist() == [[0, 1, 1], [0, 0, 0]]
    assert count_below(torch.empty(2, 0), y).shape == (2, 0)
    assert count_below(x, torch.empty(2, 0)).tolist() == [[0] * 3] * 2


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(1, 30),
    st.integers(0, 3),
    st.lists(_values, min_size=1, max_size=30),
    st.sampled_from([torch.float32, torch.float64]),
    st.randoms(use_true_random=False),
)
def test_count_below_row_sums_equals_brute_force(
    groups: int, rows: int, columns: int, extra: int, y_values: list[float], dtype: torch.dtype, rng: Any
) -> None:
    """The per-row sums of the visible ranks, on a strided slice of wider logits, equal brute force."""
    pool = [*y_values, *(rng.uniform(-10, 10) for _ in range(5))]
    wide = torch.tensor(
        [[[rng.choice(pool) for _ in range(columns + extra)] for _ in range(rows)] for _ in range(groups)],
        dtype=dtype,
    )
    x = wide[..., extra:]  # not contiguous when extra > 0
    y = (
        torch.tensor([[rng.choice(pool) for _ in y_values] for _ in range(groups)], dtype=dtype)
        .sort(-1)
        .values
    )
    visible = torch.tensor([[rng.random() < 0.7 for _ in range(columns)] for _ in range(rows)])
    brute = ((y[:, None, None, :] < x[..., None]) & visible[None, ..., None]).sum((-1, -2))
    assert torch.equal(count_below_row_sums(x, y, visible), brute)
    assert torch.equal(count_below_row_sums(x, y), (y[:, None, None, :] < x[..., None]).sum((-1, -2)))
    # the torch path (other devices, autograd) gives the same sums
    assert torch.equal(count_below_row_sums(x.requires_grad_(True), y, visible), brute)
    # with the sums of phi and of x over the same entries, on both paths
    x = x.detach()
    pairs = (x[..., None].double() - y[:, None, None, :].double()).clamp_min(0).mean(-1)  # phi per x
    weights = visible.double()
    # float64 sums of terms up to 3e38 cancel in an order-dependent way: tolerate rounding at that scale
    rounding = 1e-13 * (x.double().abs().max() + y.double().abs().max()).item() * columns
    for values in (x, x.clone().requires_grad_(True)):
        sums = rank_and_phi_row_sums(values, y, visible)
        assert torch.equal(sums.below, brute)
        torch.testing.assert_close(sums.phi.detach(), (pairs * weights).sum(-1), rtol=1e-9, atol=rounding)
        torch.testing.assert_close(sums.x.detach(), (x.double() * weights).sum(-1), rtol=1e-12, atol=rounding)
