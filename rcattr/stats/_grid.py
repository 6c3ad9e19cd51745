"""Compiled CPU kernels behind [`rcattr.stats.ranks.count_below`][rcattr.stats.ranks.count_below]: exact ranks through a uniform grid.

For each row of a sorted sample `y` (its `n_valid` finite values first), a uniform grid of
`cells` cells is laid over `[y[0], y[n_valid - 1]]`. The cell of a value is
`floor((v - y[0]) * scale)` clamped to `[0, cells]`, computed in the values' dtype by the same
operations for x and y: a non-decreasing function of v under any rounding, so every y of an earlier
cell than x's is below x and every y of a later cell is above it. Per cell the grid keeps `start`,
the number of y in the cells before it, and the cell's first two y in two slots (`+inf` where it
holds fewer; the second `nan` where it holds more: a crowded cell). The rank of x is `start` of its
cell plus two comparisons with the slots: no branch, so each block of x compiles to vector code
(gathers). A block with an x in a crowded cell (on attention logits about 1 x in 1,000, where the y
are densest) is corrected by a binary search within the cell. A row whose y no grid resolves
(one distinct value, or a range wider than the dtype) is binary-searched throughout. Compiled with
numba, parallel over rows.
"""

from __future__ import annotations

import numba
import numpy as np

_CHUNK = 8192  # x per parallel work item of count_below_rows
_BLOCK = 64  # x per vectorised block, corrected as a whole when one of its x lies in a crowded cell


@numba.njit(cache=True, inline="always")
def _cell(value: float, low: float, scale: float, top: float) -> int:
    """The grid cell of `value`; `low`, `scale` and `top` (the last cell) in the values' dtype."""
    return np.int32(min(max((value - low) * scale, top - top), top))  # top - top: a 0 of the dtype


@numba.njit(cache=True, inline="always")
def _below(value: float, y: np.ndarray, first: int, end: int, right: bool) -> int:
    """`first` plus `#{y[first:end] < value}` (`<=` when `right`), by binary search."""
    while first < end:
        middle = (first + end) // 2
        if y[middle] <= value if right else y[middle] < value:
            first = middle + 1
        else:
            end = middle
    return first


@numba.njit(cache=True, inline="always")
def _slot_rank(
    value: float, start: np.ndarray, first: np.ndarray, second: np.ndarray, c: int, right: bool
) -> int:
    """`start[c]` plus the slotted y of cell `c` below `value`: the rank, unless the cell is crowded."""
    if right:  # an empty slot (+inf) is not <= an x of +inf
        return (
            start[c]
            + np.int32((first[c] <= value) & (first[c] < np.inf))
            + np.int32((second[c] <= value) & (second[c] < np.inf))
        )
    return start[c] + np.int32(first[c] < value) + np.int32(second[c] < value)


@numba.njit(cache=True, inline="always")
def _rank(
    value: float,
    y: np.ndarray,
    n_valid: int,
    start: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    low: float,
    scale: float,
    top: float,
    right: bool,
) -> int:
    """The rank of one x, with branches: the slots, or a binary search in a crowded cell or gridless row."""
    if scale == 0:
        return _below(value, y, 0, n_valid, right)
    c = _cell(value, low, scale, top)
    if second[c] != second[c]:
        return _below(value, y, start[c], start[c + 1], right)
    return _slot_rank(value, start, first, second, c, right)


@numba.njit(cache=True)
def _build_grid(
    y: np.ndarray, n_valid: int, cells: int, start: np.ndarray, first: np.ndarray, second: np.ndarray
) -> tuple:
    """Fill `start[: cells + 2]` and the slots `first`, `second` `[: cells + 1]` for the sorted row
    `y`; return the grid's `(low, scale)` in `y`'s dtype, `scale` 0 where no grid resolves it."""
    low = y[0]
    width = np.float64(y[n_valid - 1]) - np.float64(low)
    scale = y.dtype.type(cells / width) if 0.0 < width < np.inf else y.dtype.type(0)
    if not 0 < scale < np.inf:
        return low, y.dtype.type(0)
    top = y.dtype.type(cells)
    first[: cells + 1] = np.inf
    second[: cells + 1] = np.inf
    for j in range(n_valid):
        c = _cell(y[j], low, scale, top)
        held = start[c + 1]
        if held == 0:
            first[c] = y[j]
        elif held == 1:
            second[c] = y[j]
        else:
            second[c] = np.nan
        start[c + 1] = held + 1
    for c in range(1, cells + 2):
        start[c] += start[c - 1]
    return low, scale


@numba.njit(cache=True)
def _grid_cells(n_valid: int, n_x: int, cells_per_y: int) -> int:
    return max(1, min(cells_per_y * n_valid, n_x, 1 << 22))


@numba.njit(cache=True, parallel=True)
def _grids(ys: np.ndarray, n_valid: np.ndarray, n_x: int, cells_per_y: int) -> tuple:
    """Every row's grid: `start` `[G, max cells + 2]`, the slots `first`, `second`
    `[G, max cells + 1]`, `low`, `scale` `[G]` in `ys`' dtype (`scale` 0 for the rows to
    binary-search) and `cells` `[G]`."""
    groups = ys.shape[0]
    cells = np.empty(groups, np.int64)
    for g in range(groups):
        cells[g] = _grid_cells(n_valid[g], n_x, cells_per_y)
    start = np.zeros((groups, cells.max() + 2), np.int32)
    first = np.empty((groups, cells.max() + 1), ys.dtype)
    second = np.empty((groups, cells.max() + 1), ys.dtype)
    low = np.zeros(groups, ys.dtype)
    scale = np.zeros(groups, ys.dtype)
    for g in numba.prange(groups):
        if n_valid[g] > 0:
            low[g], scale[g] = _build_grid(ys[g], n_valid[g], cells[g], start[g], first[g], second[g])
    return start, first, second, low, scale, cells


@numba.njit(cache=True, parallel=True)
def count_below_rows(
    xs: np.ndarray, ys: np.ndarray, n_valid: np.ndarray, right: bool, cells_per_y: int, out: np.ndarray
) -> None:
    """`out[g, i] = #{y in ys[g, :n_valid[g]] : y < xs[g, i]}` (`<=` when `right`).

    `xs` `[G, N]`, `ys` `[G, M]` sorted rows in `xs`' dtype, `n_valid` `[G]`, `out`
    `[G, N]` integers.
    """
    groups, n = xs.shape
    start, first, second, low, scale, cells = _grids(ys, n_valid, n, cells_per_y)
    chunks = (n + _CHUNK - 1) // _CHUNK
    for item in numba.prange(groups * chunks):
        g, chunk = item // chunks, item % chunks
        x, y, row_out = xs[g], ys[g], out[g]
        grid, ones, twos = start[g], first[g], second[g]
        row_low, row_scale, top = low[g], scale[g], ys.dtype.type(cells[g])
        for block in range(chunk * _CHUNK, min(n, (chunk + 1) * _CHUNK), _BLOCK):
            end = min(n, block + _BLOCK)
            if row_scale == 0:
                for i in range(block, end):
                    row_out[i] = _below(x[i], y, 0, n_valid[g], right)
                continue
            crowded = 0
            for i in range(block, end):
                c = _cell(x[i], row_low, row_scale, top)
                row_out[i] = _slot_rank(x[i], grid, ones, twos, c, right)
                crowded += np.int32(twos[c] != twos[c])
            if crowded:
                for i in range(block, end):
                    c = _cell(x[i], row_low, row_scale, top)
                    if twos[c] != twos[c]:
                        row_out[i] = _below(x[i], y, grid[c], grid[c + 1], right)


@numba.njit(cache=True, parallel=True)
def count_below_row_sums(
    xs: np.ndarray,
    ys: np.ndarray,
    n_valid: np.ndarray,
    visible: np.ndarray,
    cells_per_y: int,
    out: np.ndarray,
) -> None:
    """`out[g, r] = sum over visible[r, c] of #{y in ys[g, :n_valid[g]] : y < xs[g, r, c]}`.

    `xs` `[G, R, C]` (any strides), `ys` `[G, M]` sorted rows in `xs`' dtype, `visible`
    `[R, C]` bool, `out` `[G, R]` int64: the ranks are summed as they are found, never stored.
    """
    _row_sums(xs, ys, n_valid, visible, cells_per_y, out, np.empty((0, 0)), np.empty((0, 0)), False)


@numba.njit(cache=True, parallel=True)
def rank_and_phi_row_sums(
    xs: np.ndarray,
    ys: np.ndarray,
    n_valid: np.ndarray,
    visible: np.ndarray,
    cells_per_y: int,
    below: np.ndarray,
    phi: np.ndarray,
    x_sums: np.ndarray,
) -> None:
    """As [`count_below_row_sums`][rcattr.stats._grid.count_below_row_sums] into `below`, with `phi[g, r]`, the sum of
    `mean_y max(x - y, 0)`, and `x_sums[g, r]`, that of `x`, over the same visible x (float64).

    `phi` comes from the prefix sums of `y - m`, `m` a middle y of the row, in float64: a shared
    offset of the logits does not cancel. Each x is ranked by the scalar [`_rank`][rcattr.stats._grid._rank].
    """
    _row_sums(xs, ys, n_valid, visible, cells_per_y, below, phi, x_sums, True)


@numba.njit(cache=True, inline="always")
def _row_sums(
    xs: np.ndarray,
    ys: np.ndarray,
    n_valid: np.ndarray,
    visible: np.ndarray,
    cells_per_y: int,
    below: np.ndarray,
    phi: np.ndarray,
    x_sums: np.ndarray,
    with_phi: bool,
) -> None:
    groups, rows, n = xs.shape
    start, first, second, low, scale, cells = _grids(ys, n_valid, rows * n, cells_per_y)
    middle = np.zeros(groups)
    prefix = np.zeros((groups, ys.shape[1] + 1))
    for g in range(groups if with_phi else 0):
        if n_valid[g] > 0:
            middle[g] = ys[g, (n_valid[g] - 1) // 2]
            for j in range(n_valid[g]):
                prefix[g, j + 1] = prefix[g, j] + (np.float64(ys[g, j]) - middle[g])
    for item in numba.prange(groups * rows):
        g, r = item // rows, item % rows
        x, seen, y, count = xs[g, r], visible[r], ys[g], n_valid[g]
        grid, ones, twos = start[g], first[g], second[g]
        row_low, row_scale, top = low[g], scale[g], ys.dtype.type(cells[g])
        total = 0
        if with_phi or row_scale == 0:
            shift, sums = middle[g], prefix[g]
            phi_total, x_total = 0.0, 0.0
            for i in range(n):
                if seen[i]:
                    rank = _rank(x[i], y, count, grid, ones, twos, row_low, row_scale, top, False)
                    total += rank
                    phi_total += max((np.float64(x[i]) - shift) * rank - sums[rank], 0.0)
                    x_total += np.float64(x[i])
            below[g, r] = total
            if with_phi:
                phi[g, r] = phi_total / max(count, 1)
                x_sums[g, r] = x_total
            continue
        for block in range(0, n, _BLOCK):
            end = min(n, block + _BLOCK)
            crowded = 0
            for i in range(block, end):
                c = _cell(x[i], row_low, row_scale, top)
                total += np.int32(seen[i]) * _slot_rank(x[i], grid, ones, twos, c, False)
                crowded += np.int32(twos[c] != twos[c])
            if crowded:
                for i in range(block, end):
                    c = _cell(x[i], row_low, row_scale, top)
                    if seen[i] and twos[c] != twos[c]:
                        total += _below(x[i], y, grid[c], grid[c + 1], False) - _slot_rank(
                            x[i], grid, ones, twos, c, False
                        )
        below[g, r] = total
