"""Validation and broadcasting of the two samples of [`rcattr.stats`][rcattr.stats] (shapes, masks, dtypes)."""

from __future__ import annotations

from typing import NamedTuple

import torch

ALLOWED_DTYPES = (torch.float32, torch.float64)


class _Prepared(NamedTuple):
    """Validated samples, cast to the accumulation dtype and expanded to the common batch shape."""

    x: torch.Tensor  # [*batch, nx], dtype
    y: torch.Tensor  # [*batch, ny], dtype
    x_mask: torch.Tensor | None  # [*batch, nx] bool, or None when every entry is valid
    y_mask: torch.Tensor | None  # [*batch, ny] bool, or None when every entry is valid


def _check_dtype(dtype: torch.dtype) -> None:
    if dtype not in ALLOWED_DTYPES:
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
    """Cast, expand to `[*batch, n]` and check the valid entries of one sample."""
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


def prepare(
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


def count(t: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Number of valid entries, `[*batch, 1]` in `t.dtype`."""
    if mask is None:
        return torch.full((*t.shape[:-1], 1), t.shape[-1], dtype=t.dtype, device=t.device)
    return mask.sum(dim=-1, keepdim=True).to(t.dtype)


def masked_mean(v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over the last dim of the entries where `mask` is True; `[*batch]`. Overwrites `v`."""
    if mask is None:
        return v.mean(dim=-1)
    return v.masked_fill_(~mask, 0.0).sum(dim=-1).div_(mask.sum(dim=-1))


def fill_invalid(t: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Replace masked entries by 0 so downstream arithmetic stays finite."""
    if mask is None:
        return t
    return torch.where(mask, t, torch.zeros((), dtype=t.dtype, device=t.device))
