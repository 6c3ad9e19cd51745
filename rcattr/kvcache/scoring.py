"""Which prompt tokens a key head keeps: RC scores against the observation window, and the decision.

At prefill the last ``w`` prompt tokens (the window ĝ) stand in for the future generation
(docs/design.md §3). For every earlier prompt token i and query head h,

    score_h(i) = E[max(X(i, ĝ) - Y(ĝ, ĝ), 0)] = mean_{j in ĝ} phi_Y(f(i, j)),

with X(i, ĝ) the w logits of the window's queries on key i and Y(ĝ, ĝ) the window's own causal
logits, or the paper's coupling-free upper bound A(X(i, ĝ), Y(ĝ, ĝ)) of that expectation
(``statistic="upper_bound"``). A key head's score aggregates its query heads (grouped-query attention).
Only the window's query rows are needed, as in SnapKV: the cost is O(H · w · n), never a prompt x
prompt matrix.
"""

from __future__ import annotations

from typing import Literal

import torch

from rcattr.stats import overlap_bounds, phi

__all__ = [
    "GroupReduce",
    "Statistic",
    "adaptive_keep",
    "budget_keep",
    "fixed_ratio_keep",
    "leading_tokens",
    "value_weighted",
    "window_rc_scores",
]

GroupReduce = Literal["mean", "max"]
Statistic = Literal["expected", "upper_bound"]


def window_rc_scores(
    window_logits: torch.Tensor,
    window_visible: torch.Tensor,
    kv_heads: int,
    *,
    group_reduce: GroupReduce = "mean",
    statistic: Statistic = "expected",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Expected RC (or its upper bound) of every key outside the window against the window, per key head.

    Parameters
    ----------
    window_logits : torch.Tensor
        ``[B, H, w, n]`` raw logits ``<q_j, k_i>`` of the last ``w`` prompt queries on all ``n`` keys.
    window_visible : torch.Tensor
        ``[B, w, n]`` bool, True where window query j may attend to key i (causality and padding).
    kv_heads : int
        Number of key heads; query head h belongs to key head ``h // (H / kv_heads)``.
    group_reduce : {"mean", "max"}
        How a key head aggregates the scores of the query heads that read it.
    statistic : {"expected", "upper_bound"}
        ``E[max(X - Y, 0)]`` under the product coupling, or the bound
        ``A = ∫ min(F_Y, 1 - F_X) dt`` that holds for every coupling (RCStat Thm 3.1).
    dtype : torch.dtype
        Accumulation dtype.

    Returns
    -------
    torch.Tensor
        ``[B, kv_heads, n - w]`` scores (>= 0) of the keys before the window; keys no window query
        sees (padding) are ``nan``.
    """
    batch, heads, w, n = window_logits.shape
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads cannot share {kv_heads} key heads evenly")
    context = n - w
    self_logits = window_logits[..., context:].reshape(batch, heads, w * w)
    self_visible = window_visible[:, :, context:].reshape(batch, 1, w * w)
    cross = window_logits[..., :context].transpose(-1, -2).reshape(batch, heads, context * w)
    cross_visible = window_visible[:, :, :context].transpose(-1, -2)[:, None]  # [B, 1, context, w]
    seen_by = cross_visible.sum(-1)  # [B, 1, context]
    if statistic == "expected":
        per_row = phi(cross, self_logits, y_mask=self_visible, dtype=dtype).view(batch, heads, context, w)
        score = (per_row * cross_visible).sum(-1) / seen_by.clamp_min(1)  # [B, H, context]
    else:  # keys no window query sees get a dummy sample and are set to nan below
        _, score = overlap_bounds(
            cross.view(batch, heads, context, w),
            self_logits[:, :, None],
            x_mask=cross_visible | (seen_by == 0)[..., None],
            y_mask=self_visible[:, :, None],
            dtype=dtype,
        )
    grouped = score.view(batch, kv_heads, heads // kv_heads, context)
    reduced = grouped.mean(2) if group_reduce == "mean" else grouped.amax(2)
    return reduced.masked_fill(seen_by == 0, float("nan"))


def value_weighted(scores: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Scores times the norm of each key's value vector, as Expected Attention and VATP weight theirs.

    A key's contribution to the attention output is its weight times its value: a key with a small
    value moves the output little however much it is attended to.

    Parameters
    ----------
    scores : torch.Tensor
        ``[B, Hkv, m]`` scores of the first ``m`` keys.
    values : torch.Tensor
        ``[B, Hkv, n, d]`` the layer's values, ``n >= m``.

    Returns
    -------
    torch.Tensor
        ``[B, Hkv, m]`` in the dtype of ``scores``.
    """
    return scores * values[:, :, : scores.shape[-1]].to(scores.dtype).norm(dim=-1)


def leading_tokens(present: torch.Tensor, count: int) -> torch.Tensor:
    """``[B, n]`` bool, the first ``count`` real tokens of every row (the attention sinks).

    ``present [B, n]`` marks real tokens; with left padding a row's first real token is not at 0.
    """
    return present & (present.cumsum(-1) <= count)


def adaptive_keep(scores: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the keys whose score reaches ``c`` times their head's mean score (docs/design.md §3).

    Parameters
    ----------
    scores : torch.Tensor
        ``[B, Hkv, m]`` from :func:`window_rc_scores`; ``nan`` marks keys that are not there (padding).
    c : float
        Threshold multiplier, >= 0. A key is evicted when ``score < c · mean``: ``c = 0`` keeps every
        key, larger ``c`` evicts more.

    Returns
    -------
    keep : torch.Tensor
        ``[B, Hkv, m]`` bool; padding is never kept.
    threshold : torch.Tensor
        ``[B, Hkv]`` the threshold ``c · mean score`` of each head.
    """
    present = ~scores.isnan()
    threshold = c * scores.nan_to_num(0.0).sum(-1) / present.sum(-1).clamp_min(1)
    return present & (scores >= threshold[..., None]), threshold


def fixed_ratio_keep(scores: torch.Tensor, ratio: float, window: int) -> torch.Tensor:
    """Evict the same share ``ratio`` of every key head's prompt, lowest scores first.

    Each head keeps ``int(n · (1 - ratio))`` of its ``n`` prompt tokens (window included, as kvpress
    counts), so every head and layer gets the same budget.

    Parameters
    ----------
    scores : torch.Tensor
        ``[B, Hkv, m]`` scores of the keys before the window; ``nan`` marks padding.
    ratio : float
        Share of the prompt to evict, in ``[0, 1)``.
    window : int
        Window length (the window is kept and counts towards the budget).

    Returns
    -------
    torch.Tensor
        ``[B, Hkv, m]`` bool.
    """
    present = ~scores.isnan()
    prompt = present.sum(-1, keepdim=True) + window  # [B, Hkv, 1] real prompt tokens
    budget = (prompt * (1.0 - ratio)).floor().long().sub(window).clamp_min(0)
    order = scores.nan_to_num(float("-inf")).argsort(dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order).scatter_(
        -1, order, torch.arange(scores.shape[-1], device=scores.device).expand_as(order)
    )
    return present & (rank < budget)


def budget_keep(scores: torch.Tensor, protected: torch.Tensor, budget: int) -> torch.Tensor:
    """Keep at most ``budget`` keys per batch row (and group), the protected ones first, then the highest scores.

    Parameters
    ----------
    scores : torch.Tensor
        ``[..., m]`` scores of every candidate key (the key heads of a layer flattened, so heads keep different
        shares of the budget); ``nan`` marks keys that are not there (padding), never kept.
    protected : torch.Tensor
        ``[..., m]`` bool, keys kept whatever their score (the window, the sinks); they count in the budget.
    budget : int
        Keys a row may keep.

    Returns
    -------
    torch.Tensor
        ``[..., m]`` bool.
    """
    present = ~scores.isnan()
    room = (budget - protected.sum(-1, keepdim=True)).clamp_min(0)  # [B, 1]
    ranked = scores.nan_to_num(float("-inf")).masked_fill(protected, float("-inf"))
    order = ranked.argsort(dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order).scatter_(
        -1, order, torch.arange(scores.shape[-1], device=scores.device).expand_as(order)
    )
    return protected | (present & ~protected & (rank < room))
