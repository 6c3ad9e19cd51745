"""Bounds on `E[Z]` valid for every coupling of the two samples (RCStat Thm 3.1), in [`rcattr.stats`][rcattr.stats]."""

from __future__ import annotations

import torch

from rcattr.stats._samples import count, prepare
from rcattr.stats.ranks import sort_values, sorted_valid


def overlap_bounds(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    x_mask: torch.Tensor | None = None,
    y_mask: torch.Tensor | None = None,
    reverse: bool = False,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds on `E[max(X - Y, 0)]` valid for every coupling of the two samples.

    `lower = int max(F_Y(t) - F_X(t), 0) dt` and `upper = int min(F_Y(t), 1 - F_X(t)) dt`
    with the empirical right-continuous CDFs (RCStat Thm 3.1 / Alg 1). With `reverse=True`
    the bounds on `E[max(Y - X, 0)]`: `int max(F_X - F_Y, 0) dt` and
    `int min(F_X, 1 - F_Y) dt`. The integrands are constant on each interval
    `[t_k, t_{k+1})` between consecutive points of the sorted union of the samples and zero
    outside its range, so the integrals are exact finite sums. For equal sample sizes the
    lower bound is attained by the sorted (comonotone) pairing and the upper bound by the
    antitone pairing.

    Parameters
    ----------
    x : Tensor, shape [..., nx]
        Sample `X` (any floating dtype).
    y : Tensor, shape [..., ny]
        Sample `Y` (any floating dtype). Leading dims broadcast against those of `x`.
    x_mask, y_mask : Tensor of bool, broadcastable to `x` / `y`, optional
        `True` marks valid entries; masked entries may hold any value.
    reverse : bool, default False
        Bound `E[max(Y - X, 0)]` instead.
    dtype : torch.dtype, default torch.float64
        Accumulation and output dtype: `torch.float32` or `torch.float64`.

    Returns
    -------
    (lower, upper) : tuple of Tensor, each of shape [*batch]

    Raises
    ------
    ValueError
        As `expected_rc`.
    """
    p = prepare(x, y, x_mask, y_mask, dtype)
    xs = sorted_valid(p.x, p.x_mask)  # [*batch, nx], +inf pads last
    ys = sorted_valid(p.y, p.y_mask)  # [*batch, ny]
    t = sort_values(torch.cat([xs, ys], dim=-1))  # [*batch, nx + ny]
    dt = torch.diff(t, dim=-1)  # interval widths t_{k+1} - t_k
    # An interval [t_k, t_{k+1}) exists iff its right end is a valid (finite) point; those
    # ending at a +inf pad have width inf or nan and are dropped.
    dt.masked_fill_(~torch.isfinite(t[..., 1:]), 0.0)
    left = t[..., :-1].contiguous()  # the CDFs are constant on [t_k, t_{k+1})
    del t
    f_x = torch.searchsorted(xs, left, right=True).to(dtype).div_(count(p.x, p.x_mask))
    f_y = torch.searchsorted(ys, left, right=True).to(dtype).div_(count(p.y, p.y_mask))
    del left
    if reverse:
        f_x, f_y = f_y, f_x
    lower = (f_y - f_x).clamp_min_(0).mul_(dt).sum(dim=-1)
    upper = torch.minimum(f_y, f_x.neg_().add_(1)).mul_(dt).sum(dim=-1)
    return lower, upper
