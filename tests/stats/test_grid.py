"""The compiled grid kernels (rcattr.stats._grid) called directly: ranks against np.searchsorted, whatever the cells."""

from __future__ import annotations

import numpy as np
import pytest

from rcattr.stats._grid import count_below_row_sums, count_below_rows


def _rows(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two rows of x against sorted y: the first with ties and a crowded run, the second with pads."""
    rng = np.random.default_rng(seed)
    ys = np.sort(rng.normal(size=(2, 50)) * 3, axis=-1)
    ys[0, 20:30] = ys[0, 20]  # a run of equal values: one crowded cell
    ys[1, 40:] = np.inf  # the last 10 are pads
    n_valid = np.array([50, 40], dtype=np.int64)
    xs = rng.normal(size=(2, 300)) * 4
    xs[0, :5] = ys[0, 20]  # x equal to the run
    return xs, ys, n_valid


@pytest.mark.parametrize("cells_per_y", [1, 4])
@pytest.mark.parametrize("right", [False, True])
def test_count_below_rows_equals_searchsorted(cells_per_y: int, right: bool) -> None:
    xs, ys, n_valid = _rows(0)
    out = np.zeros(xs.shape, dtype=np.int64)
    count_below_rows(xs, ys, n_valid, right, cells_per_y, out)
    side = "right" if right else "left"
    for g in range(2):
        np.testing.assert_array_equal(out[g], np.searchsorted(ys[g, : n_valid[g]], xs[g], side=side))


def test_count_below_rows_on_a_constant_row_searches_without_a_grid() -> None:
    ys = np.full((1, 8), 2.0)
    xs = np.array([[1.0, 2.0, 3.0]])
    out = np.zeros(xs.shape, dtype=np.int64)
    count_below_rows(xs, ys, np.array([8]), False, 4, out)
    assert out.tolist() == [[0, 0, 8]]


def test_count_below_row_sums_sums_the_visible_ranks() -> None:
    xs, ys, n_valid = _rows(1)
    grid = xs.reshape(2, 30, 10)
    visible = np.random.default_rng(2).random((30, 10)) < 0.6
    out = np.zeros((2, 30), dtype=np.int64)
    count_below_row_sums(grid, ys, n_valid, visible, 4, out)
    for g in range(2):
        ranks = np.searchsorted(ys[g, : n_valid[g]], grid[g], side="left")
        np.testing.assert_array_equal(out[g], (ranks * visible).sum(-1))
