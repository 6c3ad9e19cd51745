"""Exact ranks of one sample's values in another, sorted ([`rcattr.stats`][rcattr.stats]): `#{y < x}` through a
compiled grid ([`rcattr.stats._grid`][rcattr.stats._grid]), their row sums, and the shared sort / prefix-sum kernel behind `phi`."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import numba
import numpy as np
import torch

from rcattr.stats import _grid
from rcattr.stats._samples import ALLOWED_DTYPES, count


def sort_values(t: torch.Tensor) -> torch.Tensor:
    """`torch.sort(t, dim=-1).values`, contiguous. On CPU through numpy's vectorised sort, about ten
    times faster than torch's on these sizes (a few thousand floats per row)."""
    if t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64) and not t.requires_grad:
        return torch.from_numpy(np.sort(t.numpy(), axis=-1))
    return torch.sort(t, dim=-1).values.contiguous()


def sorted_valid(t: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Sort along the last dim with masked entries replaced by `+inf` (so they sort last)."""
    if mask is not None:
        t = torch.where(mask, t, torch.full((), float("inf"), dtype=t.dtype, device=t.device))
    return sort_values(t)


# --------------------------------------------------------------------------------------------
# exact ranks through a grid
# --------------------------------------------------------------------------------------------

GRID_CELLS_PER_Y = 8
"""Grid cells per element of `Y` in [`count_below`][rcattr.stats.ranks.count_below] ([`rcattr.stats._grid`][rcattr.stats._grid]): on SmolLM2's attention
logits at 2,000 context tokens, 76 % of the `x` then fall in a cell without `y`, 23 % in a cell with
one, 1 % with two, and 0.1 % in a crowded cell (more than two `y`, searched). 4 and 16 cells per y
measured slower (a larger table makes the gathers slower, a smaller one crowds more cells)."""


def _on_grid(*tensors: torch.Tensor) -> bool:
    """Whether the compiled CPU kernels of [`rcattr.stats._grid`][rcattr.stats._grid] take these tensors."""
    return all(t.device.type == "cpu" and t.dtype in ALLOWED_DTYPES and not t.requires_grad for t in tensors)


@contextmanager
def _caller_threads() -> Iterator[None]:
    """Run a compiled kernel within the caller's thread budget and leave it as found.

    numba's parallel kernels run on OpenMP, whose thread count torch shares: a kernel launch sets it to
    numba's count (`NUMBA_NUM_THREADS`, every core by default), so a process limited to one thread
    (`torch.set_num_threads(1)`, `OMP_NUM_THREADS=1`) would be left with every core and oversubscribe
    them when several run side by side. The kernel gets `torch.get_num_threads()` threads (at most numba's
    own count), and both counts are restored after it."""
    torch_threads, numba_threads = torch.get_num_threads(), numba.get_num_threads()
    numba.set_num_threads(max(1, min(torch_threads, numba_threads)))
    try:
        yield
    finally:
        numba.set_num_threads(numba_threads)
        if torch.get_num_threads() != torch_threads:
            torch.set_num_threads(torch_threads)


def _rows(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


def _n_finite(y_sorted: torch.Tensor) -> np.ndarray:
    return _rows(torch.isfinite(y_sorted).sum(-1))


def count_below(x: torch.Tensor, y_sorted: torch.Tensor, *, right: bool = False) -> torch.Tensor:
    """`#{y < x}` (`#{y <= x}` with `right=True`) for every `x`: `torch.searchsorted`, exactly.

    On CPU a compiled kernel ([`rcattr.stats._grid`][rcattr.stats._grid]) lays a uniform grid over the range of each row of
    `y_sorted` and keeps, per cell, how many `y` lie in earlier cells and the cell's first two `y`:
    an `x` is answered by one lookup and two comparisons, in vector code, and the rare `x` whose cell
    holds more `y` by a binary search within it. One pass over `x`, about ten times faster than
    `torch.searchsorted` on attention logits. Other devices and dtypes use `torch.searchsorted`.

    Parameters
    ----------
    x : Tensor, shape [*batch, nx]
        Finite values, in the dtype of `y_sorted`.
    y_sorted : Tensor, shape [*batch, ny]
        Each row sorted in increasing order; its finite values first, `+inf` pads last.

    Returns
    -------
    Tensor of int32 (int64 for very large inputs), shape [*batch, nx]
    """
    if x.dtype != y_sorted.dtype:
        raise ValueError(f"x ({x.dtype}) and y_sorted ({y_sorted.dtype}) must share a dtype")
    if x.shape[:-1] != y_sorted.shape[:-1]:
        raise ValueError(
            f"x {tuple(x.shape)} and y_sorted {tuple(y_sorted.shape)} must have the same batch dimensions"
        )
    small = y_sorted.shape[-1] < 2**31
    if not _on_grid(x, y_sorted):
        return torch.searchsorted(y_sorted.contiguous(), x.contiguous(), right=right, out_int32=small)
    groups = math.prod(x.shape[:-1])
    xs = x.reshape(groups, x.shape[-1])
    ys = y_sorted.reshape(groups, y_sorted.shape[-1]).contiguous()
    out = torch.empty(xs.shape, dtype=torch.int32 if small else torch.long)
    if out.numel():
        if ys.shape[-1] == 0:
            out.zero_()
        else:
            with _caller_threads():
                _grid.count_below_rows(
                    _rows(xs), _rows(ys), _n_finite(ys), right, GRID_CELLS_PER_Y, out.numpy()
                )
    return out.view(x.shape)


def count_below_row_sums(
    x: torch.Tensor, y_sorted: torch.Tensor, visible: torch.Tensor | None = None
) -> torch.Tensor:
    """`sum_c #{y < x[g, r, c]}` over the visible `c` of every row: [`count_below`][rcattr.stats.ranks.count_below] summed, without
    storing the ranks.

    Parameters
    ----------
    x : Tensor, shape [G, R, C]
        Finite values in the dtype of `y_sorted`; any strides (e.g. a slice of wider logits).
    y_sorted : Tensor, shape [G, ny]
        As [`count_below`][rcattr.stats.ranks.count_below]'s.
    visible : Tensor of bool, shape [R, C], optional
        The entries of each `[R, C]` slice that count; all by default.

    Returns
    -------
    Tensor of int64, shape [G, R]
    """
    if visible is None:
        visible = torch.ones(x.shape[1:], dtype=torch.bool, device=x.device)
    if not _on_grid(x, y_sorted) or y_sorted.shape[-1] == 0:
        below = count_below(x.flatten(1), y_sorted.contiguous()).view(x.shape)
        return below.masked_fill_(~visible, 0).sum(-1, dtype=torch.long)
    out = torch.zeros(x.shape[:2], dtype=torch.long)
    if not out.numel():
        return out
    ys = y_sorted.contiguous()
    with _caller_threads():
        _grid.count_below_row_sums(
            _rows(x),
            _rows(ys),
            _n_finite(ys),
            _rows(visible.expand(x.shape[1:])),
            GRID_CELLS_PER_Y,
            out.numpy(),
        )
    return out


class RowSums(NamedTuple):
    """Sums over the visible `x` of each row of `[G, R, C]` logits against its group's sorted `y`."""

    below: torch.Tensor  # [G, R] int64: sum of #{y < x}
    phi: torch.Tensor  # [G, R] float64: sum of phi_Y(x) = mean_y max(x - y, 0)
    x: torch.Tensor  # [G, R] float64: sum of x


def rank_and_phi_row_sums(
    x: torch.Tensor, y_sorted: torch.Tensor, visible: torch.Tensor | None = None
) -> RowSums:
    """[`count_below_row_sums`][rcattr.stats.ranks.count_below_row_sums] with the sums of [`phi`][rcattr.stats.ranks.RowSums.phi] and of `x` over the same entries.

    The row means of `phi` are the per-row `E[Z]`, and with those of `x` the per-row `E[Z']`
    (`E[Z] - E[Z'] = E[X] - E[Y]`), without storing any per-`x` value.

    Parameters
    ----------
    x : Tensor, shape [G, R, C]
        Finite values in the dtype of `y_sorted`; any strides.
    y_sorted : Tensor, shape [G, ny]
        As [`count_below`][rcattr.stats.ranks.count_below]'s, with at least one finite value per row.
    visible : Tensor of bool, shape [R, C], optional
        The entries of each `[R, C]` slice that count; all by default.

    Returns
    -------
    RowSums
        `below` (int64), `phi` and `x` (float64), each of shape [G, R].
    """
    if visible is None:
        visible = torch.ones(x.shape[1:], dtype=torch.bool, device=x.device)
    if not _on_grid(x, y_sorted):
        ys = y_sorted.to(torch.float64)
        values = x.to(torch.float64)
        s = rank_stats(values.flatten(1), ys, torch.isfinite(ys), reverse=False, need_sums=True)
        weights = visible.to(torch.float64)
        below = (s.n_beyond.view(x.shape) * weights).sum(-1).round().long()
        return RowSums(
            below, (phi_from_stats(s, False).view(x.shape) * weights).sum(-1), (values * weights).sum(-1)
        )
    sums = RowSums(
        *(torch.zeros(x.shape[:2], dtype=dtype) for dtype in (torch.long, torch.float64, torch.float64))
    )
    if sums.below.numel():
        ys = y_sorted.contiguous()
        with _caller_threads():
            _grid.rank_and_phi_row_sums(
                _rows(x),
                _rows(ys),
                _n_finite(ys),
                _rows(visible.expand(x.shape[1:])),
                GRID_CELLS_PER_Y,
                *(t.numpy() for t in sums),
            )
    return sums


# --------------------------------------------------------------------------------------------
# the shared sort / prefix-sum kernel
# --------------------------------------------------------------------------------------------


class _RankStats(NamedTuple):
    n_beyond: torch.Tensor  # [*batch, nx]: #{y < x} (forward) or #{y > x} (reverse), in dtype
    n_y: torch.Tensor  # [*batch, 1]: number of valid y, in dtype
    partial_sum: torch.Tensor | None  # [*batch, nx]: sum of (y - c) over those y
    x_shifted: torch.Tensor | None  # [*batch, nx]: x - c


def rank_stats(
    x: torch.Tensor,
    y: torch.Tensor,
    y_mask: torch.Tensor | None,
    *,
    reverse: bool,
    need_sums: bool,
) -> _RankStats:
    """Per-x counts (and partial sums) of the y strictly below (or above) x.

    Sorts `y` once, then locates every `x` with `torch.searchsorted`; partial sums come
    from a prefix (forward) or suffix (reverse) cumulative sum of the sorted `y`. The sums
    are taken after shifting both samples by `c`, a valid element of `y` near its median:
    `phi` is shift invariant, and the shift removes the cancellation between
    `x * count` and the sum when the logits share a large offset. The counts are located on
    the unshifted values so that rounding in the shift cannot create or break ties.

    Parameters
    ----------
    x : Tensor, shape [*batch, nx]
        Finite query values, already in the accumulation dtype.
    y : Tensor, shape [*batch, ny]
        Reference sample, same dtype; entries where `y_mask` is False are ignored.
    y_mask : Tensor of bool, shape [*batch, ny], or None
    reverse : bool
        Count `y > x` instead of `y < x`.
    need_sums : bool
        Also return the partial sums and the shifted `x`.
    """
    ys = sorted_valid(y, y_mask)  # [*batch, ny], valid first, +inf pads last
    n_y = count(y, y_mask)  # [*batch, 1]
    xq = x.contiguous()
    # Pads are +inf and every x is finite, so pads never count as <= x.
    pos = count_below(xq, ys, right=reverse)  # #{y < x} (forward) or #{y <= x} (reverse)
    if not need_sums:
        return _RankStats(_beyond(pos, n_y, reverse), n_y, None, None)

    mid = ((n_y.long() - 1) // 2).clamp_min(0)  # [*batch, 1], index of a valid element
    c = torch.gather(ys, -1, mid)  # [*batch, 1]
    ysc = torch.where(torch.isfinite(ys), ys - c, torch.zeros((), dtype=ys.dtype, device=ys.device))
    zero = torch.zeros((*ys.shape[:-1], 1), dtype=ys.dtype, device=ys.device)
    if reverse:
        # suffix[..., j] = sum_{i >= j} ysc[..., i]; pads contribute 0.
        suffix = torch.flip(torch.cumsum(torch.flip(ysc, dims=(-1,)), dim=-1), dims=(-1,))
        table = torch.cat([suffix, zero], dim=-1)
    else:
        # prefix[..., k] = sum_{i < k} ysc[..., i]
        table = torch.cat([zero, torch.cumsum(ysc, dim=-1)], dim=-1)
    partial = torch.gather(table, -1, pos)
    n_beyond = _beyond(pos, n_y, reverse)
    del pos  # keep the peak memory at a few [*batch, nx] tensors
    return _RankStats(n_beyond, n_y, partial, xq - c)


def _beyond(pos: torch.Tensor, n_y: torch.Tensor, reverse: bool) -> torch.Tensor:
    """`#{y < x}` from `searchsorted(right=False)`, or `#{y > x}` from `right=True`."""
    count = pos.to(n_y.dtype)
    return count.neg_().add_(n_y) if reverse else count


def phi_from_stats(s: _RankStats, reverse: bool) -> torch.Tensor:
    """`phi` from the rank statistics; consumes (overwrites) `s.x_shifted`."""
    assert s.partial_sum is not None and s.x_shifted is not None
    num = s.x_shifted.mul_(s.n_beyond)  # x_shifted is a fresh tensor owned by s
    if reverse:
        num = num.neg_().add_(s.partial_sum)
    else:
        num = num.sub_(s.partial_sum)
    # The exact value is a sum of non-negative terms; clamp away rounding below zero.
    return num.div_(s.n_y).clamp_min_(0)
