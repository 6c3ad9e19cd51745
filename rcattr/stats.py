"""Exact statistics of relative contextualization between two samples of attention logits.

This module implements the quantities of RCStat (arXiv 2506.19549) in pure torch. For two
samples ``X`` (size ``nx``) and ``Y`` (size ``ny``) of raw attention logits, the *relative
contextualization* is ``Z = max(X - Y, 0)`` and its reverse is ``Z' = max(Y - X, 0)``.

Product coupling (every ``x`` paired with every ``y``, uniformly)
    ``E[Z] = mean_x phi_Y(x)`` with ``phi_Y(x) = (x * #{y < x} - sum_{y < x} y) / ny``.
    After sorting ``Y`` once and taking prefix sums, every ``phi_Y(x)`` costs one binary
    search, so ``E[Z]`` is exact in ``O((nx + ny) log ny)`` instead of ``O(nx * ny)``.
    The reverse uses ``phi'_Y(x) = (sum_{y > x} y - x * #{y > x}) / ny`` computed from suffix
    sums directly (not via ``E[Z] - E[Z'] = mean(X) - mean(Y)``), which keeps float32 accurate.

Bounds valid for every coupling (paper Thm 3.1 / Alg 1)
    ``int max(F_Y - F_X, 0) dt <= E[Z] <= int min(F_Y, 1 - F_X) dt`` with the empirical,
    right-continuous CDFs ``F``. Both integrands are step functions that are constant between
    consecutive points of the sorted union of the two samples, so the integrals are computed
    exactly as finite sums. For ``Z'`` the roles of ``X`` and ``Y`` swap.

Probability of superiority
    ``P(X > Y) = mean_x #{y < x} / ny`` (strict inequality): the count term of ``phi`` alone,
    a scale-free score.

Shapes and masks
    Samples are ``x: [..., nx]`` and ``y: [..., ny]``; leading (batch) dimensions broadcast
    against each other, e.g. ``x: [layers, heads, nx]`` and ``y: [layers, heads, ny]``.
    Ragged sample sets are expressed with boolean masks of the sample's shape (anything
    broadcastable to it works), ``True`` marking a valid element. Masked entries may hold any
    value, ``nan`` and ``inf`` included; they never influence a result.

All computations accumulate in ``dtype`` (``torch.float32`` or ``torch.float64``), whatever
the input's floating dtype (bf16 and fp16 inputs are cast first).

Cost
    Fully vectorised (sorts, cumulative sums, gathers). Every ``x`` is located in the sorted ``Y``
    by :func:`count_below`, a compiled pass (:mod:`rcattr._grid`): a uniform grid over ``Y``'s range
    answers an ``x`` with one table lookup and two comparisons, in vector code, and the rare ``x`` whose
    cell holds more than two ``y`` by a binary search; the result is exactly ``torch.searchsorted``'s. Besides the inputs, peak
    memory is a handful of ``[*batch, nx]`` tensors of ``dtype``: about 35 bytes per element of ``x`` for
    :func:`expected_rc` and 60 for :func:`overlap_bounds` in float64.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from rcattr import _grid

__all__ = [
    "count_below",
    "count_below_row_sums",
    "expected_rc",
    "overlap_bounds",
    "phi",
    "probability_of_superiority",
    "sort_values",
]

_ALLOWED_DTYPES = (torch.float32, torch.float64)


# --------------------------------------------------------------------------------------------
# validation and broadcasting
# --------------------------------------------------------------------------------------------


class _Prepared(NamedTuple):
    """Validated samples, cast to the accumulation dtype and expanded to the common batch shape."""

    x: torch.Tensor  # [*batch, nx], dtype
    y: torch.Tensor  # [*batch, ny], dtype
    x_mask: torch.Tensor | None  # [*batch, nx] bool, or None when every entry is valid
    y_mask: torch.Tensor | None  # [*batch, ny] bool, or None when every entry is valid


def _check_dtype(dtype: torch.dtype) -> None:
    if dtype not in _ALLOWED_DTYPES:
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")


def _check_sample(name: str, t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise ValueError(f"{name} must have a floating-point dtype, got {t.dtype}")
    if t.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension (the sample dimension), got a scalar")
    if t.shape[-1] == 0:
        raise ValueError(
            f"{name} is an empty sample set: its last dimension has size 0 (shape {tuple(t.shape)})"
        )


def _check_mask(name: str, mask: torch.Tensor | None, sample_name: str, sample: torch.Tensor) -> None:
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a bool torch.Tensor or None, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(f"{name} must have dtype torch.bool (True = valid entry), got {mask.dtype}")
    try:
        shape = torch.broadcast_shapes(mask.shape, sample.shape)
    except RuntimeError:
        shape = None
    if shape is None or mask.ndim == 0 or shape[-1] != sample.shape[-1]:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast against {sample_name} "
            f"of shape {tuple(sample.shape)}"
        )


def _finalize(
    name: str,
    t: torch.Tensor,
    mask_name: str,
    mask: torch.Tensor | None,
    batch: torch.Size,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Cast, expand to ``[*batch, n]`` and check the valid entries of one sample."""
    n = t.shape[-1]
    t = t.to(dtype).expand(*batch, n)
    if mask is None:
        n_bad = int((~torch.isfinite(t)).sum())
        if n_bad:
            raise ValueError(
                f"{name} contains {n_bad} non-finite value(s) (after casting to {dtype}); "
                f"mask them out with {mask_name} or remove them"
            )
        return t, None
    mask = mask.expand(*batch, n)
    n_bad = int((~torch.isfinite(t) & mask).sum())
    if n_bad:
        raise ValueError(
            f"{name} contains {n_bad} non-finite value(s) among the entries marked valid by "
            f"{mask_name} (after casting to {dtype})"
        )
    n_empty = int((~mask.any(dim=-1)).sum())
    if n_empty:
        n_batch = mask[..., 0].numel()
        raise ValueError(
            f"{mask_name} leaves {n_empty} of {n_batch} batch element(s) of {name} without any valid "
            f"entry (an empty sample set)"
        )
    return t, mask


def _prepare(
    x: torch.Tensor,
    y: torch.Tensor,
    x_mask: torch.Tensor | None,
    y_mask: torch.Tensor | None,
    dtype: torch.dtype,
) -> _Prepared:
    _check_dtype(dtype)
    _check_sample("x", x)
    _check_sample("y", y)
    _check_mask("x_mask", x_mask, "x", x)
    _check_mask("y_mask", y_mask, "y", y)
    lead = [x.shape[:-1], y.shape[:-1]]
    lead += [m.shape[:-1] for m in (x_mask, y_mask) if m is not None]
    try:
        batch = torch.broadcast_shapes(*lead)
    except RuntimeError:
        raise ValueError(
            f"the leading (batch) dimensions of x {tuple(x.shape[:-1])}, y {tuple(y.shape[:-1])} "
            "and their masks do not broadcast against each other"
        ) from None
    xt, xm = _finalize("x", x, "x_mask", x_mask, batch, dtype)
    yt, ym = _finalize("y", y, "y_mask", y_mask, batch, dtype)
    return _Prepared(xt, yt, xm, ym)


def _count(t: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Number of valid entries, ``[*batch, 1]`` in ``t.dtype``."""
    if mask is None:
        return torch.full((*t.shape[:-1], 1), t.shape[-1], dtype=t.dtype, device=t.device)
    return mask.sum(dim=-1, keepdim=True).to(t.dtype)


def sort_values(t: torch.Tensor) -> torch.Tensor:
    """``torch.sort(t, dim=-1).values``, contiguous. On CPU through numpy's vectorised sort, about ten
    times faster than torch's on these sizes (a few thousand floats per row)."""
    if t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64) and not t.requires_grad:
        return torch.from_numpy(np.sort(t.numpy(), axis=-1))
    return torch.sort(t, dim=-1).values.contiguous()


def _sorted_valid(t: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Sort along the last dim with masked entries replaced by ``+inf`` (so they sort last)."""
    if mask is not None:
        t = torch.where(mask, t, torch.full((), float("inf"), dtype=t.dtype, device=t.device))
    return sort_values(t)


def _masked_mean(v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over the last dim of the entries where ``mask`` is True; ``[*batch]``. Overwrites ``v``."""
    if mask is None:
        return v.mean(dim=-1)
    return v.masked_fill_(~mask, 0.0).sum(dim=-1).div_(mask.sum(dim=-1))


# --------------------------------------------------------------------------------------------
# exact ranks through a grid
# --------------------------------------------------------------------------------------------

GRID_CELLS_PER_Y = 8
"""Grid cells per element of ``Y`` in :func:`count_below` (:mod:`rcattr._grid`): on SmolLM2's attention
logits at 2,000 context tokens, 76 % of the ``x`` then fall in a cell without ``y``, 23 % in a cell with
one, 1 % with two, and 0.1 % in a crowded cell (more than two ``y``, searched). 4 and 16 cells per y
measured slower (a larger table makes the gathers slower, a smaller one crowds more cells)."""


def _on_grid(*tensors: torch.Tensor) -> bool:
    """Whether the compiled CPU kernels of :mod:`rcattr._grid` take these tensors."""
    return all(t.device.type == "cpu" and t.dtype in _ALLOWED_DTYPES and not t.requires_grad for t in tensors)


def _rows(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


def _n_finite(y_sorted: torch.Tensor) -> np.ndarray:
    return _rows(torch.isfinite(y_sorted).sum(-1))


def count_below(x: torch.Tensor, y_sorted: torch.Tensor, *, right: bool = False) -> torch.Tensor:
    """``#{y < x}`` (``#{y <= x}`` with ``right=True``) for every ``x``: ``torch.searchsorted``, exactly.

    On CPU a compiled kernel (:mod:`rcattr._grid`) lays a uniform grid over the range of each row of
    ``y_sorted`` and keeps, per cell, how many ``y`` lie in earlier cells and the cell's first two ``y``:
    an ``x`` is answered by one lookup and two comparisons, in vector code, and the rare ``x`` whose cell
    holds more ``y`` by a binary search within it. One pass over ``x``, about ten times faster than
    ``torch.searchsorted`` on attention logits. Other devices and dtypes use ``torch.searchsorted``.

    Parameters
    ----------
    x : Tensor, shape [*batch, nx]
        Finite values, in the dtype of ``y_sorted``.
    y_sorted : Tensor, shape [*batch, ny]
        Each row sorted in increasing order; its finite values first, ``+inf`` pads last.

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
            _grid.count_below_rows(_rows(xs), _rows(ys), _n_finite(ys), right, GRID_CELLS_PER_Y, out.numpy())
    return out.view(x.shape)


def count_below_row_sums(
    x: torch.Tensor, y_sorted: torch.Tensor, visible: torch.Tensor | None = None
) -> torch.Tensor:
    """``sum_c #{y < x[g, r, c]}`` over the visible ``c`` of every row: :func:`count_below` summed, without
    storing the ranks.

    Parameters
    ----------
    x : Tensor, shape [G, R, C]
        Finite values in the dtype of ``y_sorted``; any strides (e.g. a slice of wider logits).
    y_sorted : Tensor, shape [G, ny]
        As :func:`count_below`'s.
    visible : Tensor of bool, shape [R, C], optional
        The entries of each ``[R, C]`` slice that count; all by default.

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
    _grid.count_below_row_sums(
        _rows(x), _rows(ys), _n_finite(ys), _rows(visible.expand(x.shape[1:])), GRID_CELLS_PER_Y, out.numpy()
    )
    return out


class RowSums(NamedTuple):
    """Sums over the visible ``x`` of each row of ``[G, R, C]`` logits against its group's sorted ``y``."""

    below: torch.Tensor  # [G, R] int64: sum of #{y < x}
    phi: torch.Tensor  # [G, R] float64: sum of phi_Y(x) = mean_y max(x - y, 0)
    x: torch.Tensor  # [G, R] float64: sum of x


def rank_and_phi_row_sums(
    x: torch.Tensor, y_sorted: torch.Tensor, visible: torch.Tensor | None = None
) -> RowSums:
    """:func:`count_below_row_sums` with the sums of :func:`phi` and of ``x`` over the same entries.

    The row means of ``phi`` are the per-row ``E[Z]``, and with those of ``x`` the per-row ``E[Z']``
    (``E[Z] - E[Z'] = E[X] - E[Y]``), without storing any per-``x`` value.

    Parameters
    ----------
    x : Tensor, shape [G, R, C]
        Finite values in the dtype of ``y_sorted``; any strides.
    y_sorted : Tensor, shape [G, ny]
        As :func:`count_below`'s, with at least one finite value per row.
    visible : Tensor of bool, shape [R, C], optional
        The entries of each ``[R, C]`` slice that count; all by default.

    Returns
    -------
    RowSums
        ``below`` (int64), ``phi`` and ``x`` (float64), each of shape [G, R].
    """
    if visible is None:
        visible = torch.ones(x.shape[1:], dtype=torch.bool, device=x.device)
    if not _on_grid(x, y_sorted):
        ys = y_sorted.to(torch.float64)
        values = x.to(torch.float64)
        s = _rank_stats(values.flatten(1), ys, torch.isfinite(ys), reverse=False, need_sums=True)
        weights = visible.to(torch.float64)
        below = (s.n_beyond.view(x.shape) * weights).sum(-1).round().long()
        return RowSums(
            below, (_phi_from_stats(s, False).view(x.shape) * weights).sum(-1), (values * weights).sum(-1)
        )
    sums = RowSums(
        *(torch.zeros(x.shape[:2], dtype=dtype) for dtype in (torch.long, torch.float64, torch.float64))
    )
    if sums.below.numel():
        ys = y_sorted.contiguous()
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


def _rank_stats(
    x: torch.Tensor,
    y: torch.Tensor,
    y_mask: torch.Tensor | None,
    *,
    reverse: bool,
    need_sums: bool,
) -> _RankStats:
    """Per-x counts (and partial sums) of the y strictly below (or above) x.

    Sorts ``y`` once, then locates every ``x`` with ``torch.searchsorted``; partial sums come
    from a prefix (forward) or suffix (reverse) cumulative sum of the sorted ``y``. The sums
    are taken after shifting both samples by ``c``, a valid element of ``y`` near its median:
    ``phi`` is shift invariant, and the shift removes the cancellation between
    ``x * count`` and the sum when the logits share a large offset. The counts are located on
    the unshifted values so that rounding in the shift cannot create or break ties.

    Parameters
    ----------
    x : Tensor, shape [*batch, nx]
        Finite query values, already in the accumulation dtype.
    y : Tensor, shape [*batch, ny]
        Reference sample, same dtype; entries where ``y_mask`` is False are ignored.
    y_mask : Tensor of bool, shape [*batch, ny], or None
    reverse : bool
        Count ``y > x`` instead of ``y < x``.
    need_sums : bool
        Also return the partial sums and the shifted ``x``.
    """
    ys = _sorted_valid(y, y_mask)  # [*batch, ny], valid first, +inf pads last
    n_y = _count(y, y_mask)  # [*batch, 1]
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
    """``#{y < x}`` from ``searchsorted(right=False)``, or ``#{y > x}`` from ``right=True``."""
    count = pos.to(n_y.dtype)
    return count.neg_().add_(n_y) if reverse else count


def _phi_from_stats(s: _RankStats, reverse: bool) -> torch.Tensor:
    """``phi`` from the rank statistics; consumes (overwrites) ``s.x_shifted``."""
    assert s.partial_sum is not None and s.x_shifted is not None
    num = s.x_shifted.mul_(s.n_beyond)  # x_shifted is a fresh tensor owned by s
    if reverse:
        num = num.neg_().add_(s.partial_sum)
    else:
        num = num.sub_(s.partial_sum)
    # The exact value is a sum of non-negative terms; clamp away rounding below zero.
    return num.div_(s.n_y).clamp_min_(0)


def _fill_invalid(t: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Replace masked entries by 0 so downstream arithmetic stays finite."""
    if mask is None:
        return t
    return torch.where(mask, t, torch.zeros((), dtype=t.dtype, device=t.device))


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------


def phi(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    y_mask: torch.Tensor | None = None,
    reverse: bool = False,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Per-element expected relative contextualization of each ``x`` against the sample ``y``.

    ``phi_Y(x) = mean_y max(x - y, 0) = (x * #{y < x} - sum_{y < x} y) / ny``, or with
    ``reverse=True``, ``phi'_Y(x) = mean_y max(y - x, 0) = (sum_{y > x} y - x * #{y > x}) / ny``.

    Parameters
    ----------
    x : Tensor, shape [..., nx]
        Query values (any floating dtype). All entries must be finite.
    y : Tensor, shape [..., ny]
        Reference sample (any floating dtype). Leading dims broadcast against those of ``x``.
    y_mask : Tensor of bool, shape broadcastable to ``y``, optional
        ``True`` marks valid entries of ``y``; masked entries may hold any value.
    reverse : bool, default False
        Compute ``mean_y max(y - x, 0)`` instead.
    dtype : torch.dtype, default torch.float64
        Accumulation and output dtype: ``torch.float32`` or ``torch.float64``.

    Returns
    -------
    Tensor, shape [*batch, nx]
        ``batch`` is the broadcast of the leading dims of ``x``, ``y`` and ``y_mask``.

    Raises
    ------
    ValueError
        On an empty sample, a batch element of ``y`` with no valid entry, non-finite valid
        values, a mask that does not broadcast, non-floating input or an unsupported ``dtype``.
    """
    p = _prepare(x, y, None, y_mask, dtype)
    return _phi_from_stats(_rank_stats(p.x, p.y, p.y_mask, reverse=reverse, need_sums=True), reverse)


def expected_rc(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    x_mask: torch.Tensor | None = None,
    y_mask: torch.Tensor | None = None,
    reverse: bool = False,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Exact ``E[max(X - Y, 0)]`` under the product coupling of the two samples.

    Equals the mean over all ``nx * ny`` pairs of ``max(x - y, 0)`` (or ``max(y - x, 0)`` with
    ``reverse=True``), computed in ``O((nx + ny) log ny)`` as the masked mean of :func:`phi`.

    Parameters
    ----------
    x : Tensor, shape [..., nx]
        Sample ``X`` (any floating dtype).
    y : Tensor, shape [..., ny]
        Sample ``Y`` (any floating dtype). Leading dims broadcast against those of ``x``.
    x_mask : Tensor of bool, shape broadcastable to ``x``, optional
        ``True`` marks valid entries of ``x``; masked entries may hold any value.
    y_mask : Tensor of bool, shape broadcastable to ``y``, optional
        ``True`` marks valid entries of ``y``; masked entries may hold any value.
    reverse : bool, default False
        Compute ``E[max(Y - X, 0)]`` instead.
    dtype : torch.dtype, default torch.float64
        Accumulation and output dtype: ``torch.float32`` or ``torch.float64``.

    Returns
    -------
    Tensor, shape [*batch]
        The broadcast leading dims; a 0-d tensor for 1-d inputs.

    Raises
    ------
    ValueError
        As :func:`phi`, also for ``x`` / ``x_mask``.
    """
    p = _prepare(x, y, x_mask, y_mask, dtype)
    xq = _fill_invalid(p.x, p.x_mask)
    per_x = _phi_from_stats(_rank_stats(xq, p.y, p.y_mask, reverse=reverse, need_sums=True), reverse)
    return _masked_mean(per_x, p.x_mask)


def probability_of_superiority(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    x_mask: torch.Tensor | None = None,
    y_mask: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """``P(X > Y)`` (strict) under the product coupling: ``mean_x #{y < x} / ny``.

    A scale-free head score in ``[0, 1]``; ties count as "not greater".

    Parameters
    ----------
    x : Tensor, shape [..., nx]
        Sample ``X`` (any floating dtype).
    y : Tensor, shape [..., ny]
        Sample ``Y`` (any floating dtype). Leading dims broadcast against those of ``x``.
    x_mask, y_mask : Tensor of bool, broadcastable to ``x`` / ``y``, optional
        ``True`` marks valid entries; masked entries may hold any value.
    dtype : torch.dtype, default torch.float64
        Accumulation and output dtype: ``torch.float32`` or ``torch.float64``.

    Returns
    -------
    Tensor, shape [*batch]

    Raises
    ------
    ValueError
        As :func:`expected_rc`.
    """
    p = _prepare(x, y, x_mask, y_mask, dtype)
    xq = _fill_invalid(p.x, p.x_mask)
    s = _rank_stats(xq, p.y, p.y_mask, reverse=False, need_sums=False)
    return _masked_mean(s.n_beyond / s.n_y, p.x_mask)


def overlap_bounds(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    x_mask: torch.Tensor | None = None,
    y_mask: torch.Tensor | None = None,
    reverse: bool = False,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds on ``E[max(X - Y, 0)]`` valid for every coupling of the two samples.

    ``lower = int max(F_Y(t) - F_X(t), 0) dt`` and ``upper = int min(F_Y(t), 1 - F_X(t)) dt``
    with the empirical right-continuous CDFs (RCStat Thm 3.1 / Alg 1). With ``reverse=True``
    the bounds on ``E[max(Y - X, 0)]``: ``int max(F_X - F_Y, 0) dt`` and
    ``int min(F_X, 1 - F_Y) dt``. The integrands are constant on each interval
    ``[t_k, t_{k+1})`` between consecutive points of the sorted union of the samples and zero
    outside its range, so the integrals are exact finite sums. For equal sample sizes the
    lower bound is attained by the sorted (comonotone) pairing and the upper bound by the
    antitone pairing.

    Parameters
    ----------
    x : Tensor, shape [..., nx]
        Sample ``X`` (any floating dtype).
    y : Tensor, shape [..., ny]
        Sample ``Y`` (any floating dtype). Leading dims broadcast against those of ``x``.
    x_mask, y_mask : Tensor of bool, broadcastable to ``x`` / ``y``, optional
        ``True`` marks valid entries; masked entries may hold any value.
    reverse : bool, default False
        Bound ``E[max(Y - X, 0)]`` instead.
    dtype : torch.dtype, default torch.float64
        Accumulation and output dtype: ``torch.float32`` or ``torch.float64``.

    Returns
    -------
    (lower, upper) : tuple of Tensor, each of shape [*batch]

    Raises
    ------
    ValueError
        As :func:`expected_rc`.
    """
    p = _prepare(x, y, x_mask, y_mask, dtype)
    xs = _sorted_valid(p.x, p.x_mask)  # [*batch, nx], +inf pads last
    ys = _sorted_valid(p.y, p.y_mask)  # [*batch, ny]
    t = sort_values(torch.cat([xs, ys], dim=-1))  # [*batch, nx + ny]
    dt = torch.diff(t, dim=-1)  # interval widths t_{k+1} - t_k
    # An interval [t_k, t_{k+1}) exists iff its right end is a valid (finite) point; those
    # ending at a +inf pad have width inf or nan and are dropped.
    dt.masked_fill_(~torch.isfinite(t[..., 1:]), 0.0)
    left = t[..., :-1].contiguous()  # the CDFs are constant on [t_k, t_{k+1})
    del t
    f_x = torch.searchsorted(xs, left, right=True).to(dtype).div_(_count(p.x, p.x_mask))
    f_y = torch.searchsorted(ys, left, right=True).to(dtype).div_(_count(p.y, p.y_mask))
    del left
    if reverse:
        f_x, f_y = f_y, f_x
    lower = (f_y - f_x).clamp_min_(0).mul_(dt).sum(dim=-1)
    upper = torch.minimum(f_y, f_x.neg_().add_(1)).mul_(dt).sum(dim=-1)
    return lower, upper
