"""Compiled CPU kernels behind :func:`rcattr.stats.count_below`: exact ranks through a uniform grid.

For each row of a sorted sample ``y`` (its ``n_valid`` finite values first), a uniform grid of
``cells`` cells is laid over ``[y[0], y[n_valid - 1]]`` and ``start[c]`` holds the number of y in the
cells before ``c``. The cell of a value is ``floor((v - y[0]) * scale)`` clamped to ``[0, cells]``,
computed in float64 by the same operations for x and y: a non-decreasing function of v under any
rounding, so every y of an earlier cell than x's is below x and every y of a later cell is above it.
The rank of x is then ``start[c]`` plus its rank among the y of its own cell, found by a scan (a few y)
or a binary search (many, e.g. ties). One pass over x, compiled with numba, parallel over rows.
"""

from __future__ import annotations

import numba
import numpy as np

_SCAN = 16  # cells holding up to this many y are scanned, larger ones binary-searched
_CHUNK = 8192  # x per parallel work item of count_below


@numba.njit(cache=True, inline="always")
def _cell(value: float, low: float, scale: float, cells: int) -> int:
    grid = (np.float64(value) - low) * scale
    if not grid >= 0.0:  # below the range, or nan from inf * 0
        return 0
    if grid >= cells:
        return cells
    return int(grid)


@numba.njit(cache=True)
def _build_grid(y: np.ndarray, n_valid: int, cells: int, start: np.ndarray) -> tuple[float, float]:
    """Fill ``start[: cells + 2]`` for the sorted row ``y``; return the grid's ``(low, scale)``."""
    low = np.float64(y[0])
    width = np.float64(y[n_valid - 1]) - low
    scale = cells / width if 0.0 < width < np.inf else 0.0  # one distinct value: every v in cell 0
    start[: cells + 2] = 0
    for j in range(n_valid):
        start[_cell(y[j], low, scale, cells) + 1] += 1
    for c in range(1, cells + 2):
        start[c] += start[c - 1]
    return low, scale


@numba.njit(cache=True, inline="always")
def _rank(
    value: float, y: np.ndarray, start: np.ndarray, low: float, scale: float, cells: int, right: bool
) -> int:
    """``#{y < value}`` (``#{y <= value}`` when ``right``) from the grid of the sorted row ``y``."""
    c = _cell(value, low, scale, cells)
    first, end = start[c], start[c + 1]
    if end - first <= _SCAN:
        while first < end and (y[first] <= value if right else y[first] < value):
            first += 1
        return first
    while first < end:
        middle = (first + end) // 2
        if y[middle] <= value if right else y[middle] < value:
            first = middle + 1
        else:
            end = middle
    return first


@numba.njit(cache=True)
def _grid_cells(n_valid: int, n_x: int, cells_per_y: int) -> int:
    return max(1, min(cells_per_y * n_valid, n_x, 1 << 22))


@numba.njit(cache=True, parallel=True)
def _grids(ys: np.ndarray, n_valid: np.ndarray, n_x: int, cells_per_y: int) -> tuple:
    """Every row's grid: ``start`` ``[G, max cells + 2]``, ``low``, ``scale``, ``cells`` ``[G]``."""
    groups = ys.shape[0]
    cells = np.empty(groups, np.int64)
    for g in range(groups):
        cells[g] = _grid_cells(n_valid[g], n_x, cells_per_y)
    start = np.empty((groups, cells.max() + 2), np.int64)
    low = np.zeros(groups)
    scale = np.zeros(groups)
    for g in numba.prange(groups):
        if n_valid[g] > 0:
            low[g], scale[g] = _build_grid(ys[g], n_valid[g], cells[g], start[g])
        else:
            start[g] = 0
            cells[g] = 0
    return start, low, scale, cells


@numba.njit(cache=True, parallel=True)
def count_below_rows(
    xs: np.ndarray, ys: np.ndarray, n_valid: np.ndarray, right: bool, cells_per_y: int, out: np.ndarray
) -> None:
    """``out[g, i] = #{y in ys[g, :n_valid[g]] : y < xs[g, i]}`` (``<=`` when ``right``).

    ``xs`` ``[G, N]``, ``ys`` ``[G, M]`` sorted rows, ``n_valid`` ``[G]``, ``out`` ``[G, N]`` integers.
    """
    groups, n = xs.shape
    start, low, scale, cells = _grids(ys, n_valid, n, cells_per_y)
    chunks = (n + _CHUNK - 1) // _CHUNK
    for item in numba.prange(groups * chunks):
        g, chunk = item // chunks, item % chunks
        x, y, grid, out_row = xs[g], ys[g], start[g], out[g]
        row_low, row_scale, row_cells = low[g], scale[g], cells[g]
        for i in range(chunk * _CHUNK, min(n, (chunk + 1) * _CHUNK)):
            out_row[i] = _rank(x[i], y, grid, row_low, row_scale, row_cells, right)


@numba.njit(cache=True, parallel=True)
def count_below_row_sums(
    xs: np.ndarray,
    ys: np.ndarray,
    n_valid: np.ndarray,
    visible: np.ndarray,
    cells_per_y: int,
    out: np.ndarray,
) -> None:
    """``out[g, r] = sum over visible[r, c] of #{y in ys[g, :n_valid[g]] : y < xs[g, r, c]}``.

    ``xs`` ``[G, R, C]`` (any strides), ``ys`` ``[G, M]`` sorted rows, ``visible`` ``[R, C]`` bool,
    ``out`` ``[G, R]`` int64: the ranks are summed as they are found, never stored.
    """
    groups, rows, n = xs.shape
    start, low, scale, cells = _grids(ys, n_valid, rows * n, cells_per_y)
    for item in numba.prange(groups * rows):
        g, r = item // rows, item % rows
        x, seen, y, grid = xs[g, r], visible[r], ys[g], start[g]
        row_low, row_scale, row_cells = low[g], scale[g], cells[g]
        total = 0
        for i in range(n):
            if seen[i]:
                total += _rank(x[i], y, grid, row_low, row_scale, row_cells, False)
        out[g, r] = total
