"""The exact statistics of [`rcattr.stats`][rcattr.stats] under the product coupling: `phi`, `E[Z]` and `P(X > Y)`."""

from __future__ import annotations

import torch

from rcattr.stats._samples import fill_invalid, masked_mean, prepare
from rcattr.stats.ranks import phi_from_stats, rank_stats


def phi(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    y_mask: torch.Tensor | None = None,
    reverse: bool = False,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Per-element expected relative contextualization of each `x` against the sample `y`.

    `phi_Y(x) = mean_y max(x - y, 0) = (x * #{y < x} - sum_{y < x} y) / ny`, or with
    `reverse=True`, `phi'_Y(x) = mean_y max(y - x, 0) = (sum_{y > x} y - x * #{y > x}) / ny`.

    Parameters
    ----------
    x : Tensor, shape [..., nx]
        Query values (any floating dtype). All entries must be finite.
    y : Tensor, shape [..., ny]
        Reference sample (any floating dtype). Leading dims broadcast against those of `x`.
    y_mask : Tensor of bool, shape broadcastable to `y`, optional
        `True` marks valid entries of `y`; masked entries may hold any value.
    reverse : bool, default False
        Compute `mean_y max(y - x, 0)` instead.
    dtype : torch.dtype, default torch.float64
        Accumulation and output dtype: `torch.float32` or `torch.float64`.

    Returns
    -------
    Tensor, shape [*batch, nx]
        `batch` is the broadcast of the leading dims of `x`, `y` and `y_mask`.

    Raises
    ------
    ValueError
        On an empty sample, a batch element of `y` with no valid entry, non-finite valid
        values, a mask that does not broadcast, non-floating input or an unsupported `dtype`.
    """
    p = prepare(x, y, None, y_mask, dtype)
    return phi_from_stats(rank_stats(p.x, p.y, p.y_mask, reverse=reverse, need_sums=True), reverse)


def expected_rc(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    x_mask: torch.Tensor | None = None,
    y_mask: torch.Tensor | None = None,
    reverse: bool = False,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Exact `E[max(X - Y, 0)]` under the product coupling of the two samples.

    Equals the mean over all `nx * ny` pairs of `max(x - y, 0)` (or `max(y - x, 0)` with
    `reverse=True`), computed in `O((nx + ny) log ny)` as the masked mean of [`phi`][rcattr.stats.exact.phi].

    Parameters
    ----------
    x : Tensor, shape [..., nx]
        Sample `X` (any floating dtype).
    y : Tensor, shape [..., ny]
        Sample `Y` (any floating dtype). Leading dims broadcast against those of `x`.
    x_mask : Tensor of bool, shape broadcastable to `x`, optional
        `True` marks valid entries of `x`; masked entries may hold any value.
    y_mask : Tensor of bool, shape broadcastable to `y`, optional
        `True` marks valid entries of `y`; masked entries may hold any value.
    reverse : bool, default False
        Compute `E[max(Y - X, 0)]` instead.
    dtype : torch.dtype, default torch.float64
        Accumulation and output dtype: `torch.float32` or `torch.float64`.

    Returns
    -------
    Tensor, shape [*batch]
        The broadcast leading dims; a 0-d tensor for 1-d inputs.

    Raises
    ------
    ValueError
        As [`phi`][rcattr.stats.exact.phi], also for `x` / `x_mask`.
    """
    p = prepare(x, y, x_mask, y_mask, dtype)
    xq = fill_invalid(p.x, p.x_mask)
    per_x = phi_from_stats(rank_stats(xq, p.y, p.y_mask, reverse=reverse, need_sums=True), reverse)
    return masked_mean(per_x, p.x_mask)


def probability_of_superiority(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    x_mask: torch.Tensor | None = None,
    y_mask: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """`P(X > Y)` (strict) under the product coupling: `mean_x #{y < x} / ny`.

    A scale-free head score in `[0, 1]`; ties count as "not greater".

    Parameters
    ----------
    x : Tensor, shape [..., nx]
        Sample `X` (any floating dtype).
    y : Tensor, shape [..., ny]
        Sample `Y` (any floating dtype). Leading dims broadcast against those of `x`.
    x_mask, y_mask : Tensor of bool, broadcastable to `x` / `y`, optional
        `True` marks valid entries; masked entries may hold any value.
    dtype : torch.dtype, default torch.float64
        Accumulation and output dtype: `torch.float32` or `torch.float64`.

    Returns
    -------
    Tensor, shape [*batch]

    Raises
    ------
    ValueError
        As [`expected_rc`][rcattr.stats.exact.expected_rc].
    """
    p = prepare(x, y, x_mask, y_mask, dtype)
    xq = fill_invalid(p.x, p.x_mask)
    s = rank_stats(xq, p.y, p.y_mask, reverse=False, need_sums=False)
    return masked_mean(s.n_beyond / s.n_y, p.x_mask)
