"""The exact ranks (rcattr.stats.ranks): count_below and the row sums against searchsorted and brute force."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.stats.ranks import (
    count_below,
    count_below_row_sums,
    rank_and_phi_row_sums,
)

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
