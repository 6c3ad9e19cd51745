"""Which prompt tokens a key head keeps: RC scores against the observation window, and the decision.

At prefill the last `w` prompt tokens (the window ĝ) stand in for the future generation
(docs/design.md §3). For every earlier prompt token i and query head h,

    score_h(i) = E[max(X(i, ĝ) - Y(ĝ, ĝ), 0)] = mean_{j in ĝ} phi_Y(f(i, j)),

with X(i, ĝ) the w logits of the window's queries on key i and Y(ĝ, ĝ) the window's own causal
logits. A key head's score is the mean of its query heads' (grouped-query attention); [`WindowScorer`][rcattr.kvcache.scoring.WindowScorer]
adds the value norm and the sinks.
Only the window's query rows are needed, as in SnapKV: the cost is O(H · w · n), never a prompt x
prompt matrix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import torch

from rcattr.stats import phi

__all__ = [
    "WindowLogits",
    "WindowScorer",
    "adaptive_keep",
    "budget_keep",
    "expected_rc",
    "fixed_ratio_keep",
    "leading_tokens",
    "split_window",
    "value_weighted",
    "window_rc_scores",
]


class WindowLogits(NamedTuple):
    """The window's logits split into the two samples RC compares (see [`split_window`][rcattr.kvcache.scoring.split_window])."""

    cross: torch.Tensor  # [B, H, m * w] key i's logits from the w window queries, key-major
    own: torch.Tensor  # [B, H, w * w] the window's causal logits on itself
    cross_visible: torch.Tensor  # [B, 1, m, w] bool
    own_visible: torch.Tensor  # [B, 1, w * w] bool
    seen_by: torch.Tensor  # [B, 1, m] window queries that see each key (0: padding)


def split_window(window_logits: torch.Tensor, window_visible: torch.Tensor) -> WindowLogits:
    """Split `[B, H, w, n]` window logits and their `[B, w, n]` visibility into the keys before the
    window (`m = n - w`) and the window's own logits."""
    batch, heads, w, n = window_logits.shape
    context = n - w
    cross_visible = window_visible[:, :, :context].transpose(-1, -2)[:, None]
    return WindowLogits(
        cross=window_logits[..., :context].transpose(-1, -2).reshape(batch, heads, context * w),
        own=window_logits[..., context:].reshape(batch, heads, w * w),
        cross_visible=cross_visible,
        own_visible=window_visible[:, :, context:].reshape(batch, 1, w * w),
        seen_by=cross_visible.sum(-1),
    )


def expected_rc(split: WindowLogits, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """`[B, H, m]` per query head, `mean_{j in ĝ} phi_Y(f(i, j))` of every key i before the window over
    the window queries that see it (0 where none does)."""
    batch, heads = split.cross.shape[:2]
    context, w = split.cross_visible.shape[-2:]
    per_row = phi(split.cross, split.own, y_mask=split.own_visible, dtype=dtype).view(
        batch, heads, context, w
    )
    return (per_row * split.cross_visible).sum(-1) / split.seen_by.clamp_min(1)


def window_rc_scores(
    window_logits: torch.Tensor,
    window_visible: torch.Tensor,
    kv_heads: int,
    *,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Expected RC of every key outside the window against the window, per key head.

    Parameters
    ----------
    window_logits : torch.Tensor
        `[B, H, w, n]` raw logits `<q_j, k_i>` of the last `w` prompt queries on all `n` keys.
    window_visible : torch.Tensor
        `[B, w, n]` bool, True where window query j may attend to key i (causality and padding).
    kv_heads : int
        Number of key heads; query head h belongs to key head `h // (H / kv_heads)`, whose score is
        the mean of its query heads'.
    dtype : torch.dtype
        Accumulation dtype.

    Returns
    -------
    torch.Tensor
        `[B, kv_heads, n - w]` scores `E[max(X - Y, 0)]` (>= 0) of the keys before the window; keys
        no window query sees (padding) are `nan`.
    """
    batch, heads, w, n = window_logits.shape
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads cannot share {kv_heads} key heads evenly")
    split = split_window(window_logits, window_visible)
    grouped = expected_rc(split, dtype).view(batch, kv_heads, heads // kv_heads, n - w)
    return grouped.mean(2).masked_fill(split.seen_by == 0, float("nan"))


@dataclass(frozen=True)
class WindowScorer:
    """How a key before the window is scored: its expected RC against the window (RCStat, docs/design.md §3),
    times the norm of its value, the first `sinks` tokens kept whatever their score. Shared by
    [`RCKVCache`][rcattr.kvcache.cache.RCKVCache] and [`RCPress`][rcattr.kvcache.press.RCPress]; a subclass changes the
    statistic by overriding [`key_head_scores`][rcattr.kvcache.scoring.WindowScorer.key_head_scores].

    Parameters
    ----------
    value_norm : bool, default True
        Multiply each key's score by the norm of its value vector (as Expected Attention does).
    sinks : int, default 4
        The first real tokens of the sequence, always kept (attention sinks); they count in a head's mean
        score and in a ratio's or a budget's share.
    dtype : torch.dtype, default torch.float32
        Accumulation dtype of the scores (float32 or float64).
    """

    value_norm: bool = True
    sinks: int = 4
    dtype: torch.dtype = torch.float32
    # whether a window as long as the context (a replay, rcattr.kvcache.replay) is affordable: not when the
    # statistic compares every key with the window's own w x w logits
    replayable: ClassVar[bool] = False
    # whether it scores a chunk from the layer's attention input (hidden_state_scores) instead of the window's
    # logits (rcattr.kvcache.distilled)
    reads_hidden_states: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not isinstance(self.value_norm, bool):
            raise ValueError(f"value_norm must be True or False, got {self.value_norm!r}")
        if isinstance(self.sinks, bool) or not isinstance(self.sinks, int) or self.sinks < 0:
            raise ValueError(f"sinks must be an int >= 0, got {self.sinks!r}")
        if self.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {self.dtype}")

    def __call__(self, logits: torch.Tensor, visible: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """`[B, Hkv, m]` the score of every key before the window, from the window's `[B, H, w, m + w]`
        logits, their `[B, w, m + w]` visibility and the `[B, Hkv, >= m, d]` values."""
        scores = self.key_head_scores(logits, visible, values.shape[1])
        return value_weighted(scores, values) if self.value_norm else scores

    def key_head_scores(self, logits: torch.Tensor, visible: torch.Tensor, kv_heads: int) -> torch.Tensor:
        """`[B, kv_heads, m]` the statistic of every key, before the value norm ([`window_rc_scores`][rcattr.kvcache.scoring.window_rc_scores])."""
        return window_rc_scores(logits, visible, kv_heads, dtype=self.dtype)

    def check_model(self, model: torch.nn.Module, layers: list[int]) -> None:
        """ValueError if the scorer cannot score the evicting `layers` of `model` (every scorer of the window's
        logits can)."""

    def hidden_state_scores(
        self,
        layer: int,
        hidden: torch.Tensor,
        values: torch.Tensor,
        window_scores: Callable[[], torch.Tensor],
    ) -> torch.Tensor:
        """`[B, Hkv, m]` the score of the first `m` keys of `layer` from their attention input
        `hidden [B, m, d]` and the `[B, Hkv, >= m, d]` values, for a scorer whose `reads_hidden_states`
        is True ([`DistilledScorer`][rcattr.kvcache.distilled.DistilledScorer]); `window_scores()` computes what
        the scorer's `__call__` gives the same keys from the window's logits, for a scorer that uses both."""
        raise NotImplementedError(f"{type(self).__name__} scores from the window's logits, not hidden states")


def value_weighted(scores: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Scores times the norm of each key's value vector, as Expected Attention and VATP weight theirs.

    A key's contribution to the attention output is its weight times its value: a key with a small
    value moves the output little however much it is attended to.

    Parameters
    ----------
    scores : torch.Tensor
        `[B, Hkv, m]` scores of the first `m` keys.
    values : torch.Tensor
        `[B, Hkv, n, d]` the layer's values, `n >= m`.

    Returns
    -------
    torch.Tensor
        `[B, Hkv, m]` in the dtype of `scores`.
    """
    return scores * values[:, :, : scores.shape[-1]].to(scores.dtype).norm(dim=-1)


def leading_tokens(present: torch.Tensor, count: int) -> torch.Tensor:
    """`[B, n]` bool, the first `count` real tokens of every row (the attention sinks).

    `present [B, n]` marks real tokens; with left padding a row's first real token is not at 0.
    """
    return present & (present.cumsum(-1) <= count)


def adaptive_keep(scores: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the keys whose score reaches `c` times their head's mean score (docs/design.md §3).

    Parameters
    ----------
    scores : torch.Tensor
        `[B, Hkv, m]` from [`window_rc_scores`][rcattr.kvcache.scoring.window_rc_scores]; `nan` marks keys that are not there (padding).
    c : float
        Threshold multiplier, >= 0. A key is evicted when `score < c · mean`: `c = 0` keeps every
        key, larger `c` evicts more.

    Returns
    -------
    keep : torch.Tensor
        `[B, Hkv, m]` bool; padding is never kept.
    threshold : torch.Tensor
        `[B, Hkv]` the threshold `c · mean score` of each head.
    """
    present = ~scores.isnan()
    threshold = c * scores.nan_to_num(0.0).sum(-1) / present.sum(-1).clamp_min(1)
    return present & (scores >= threshold[..., None]), threshold


def fixed_ratio_keep(scores: torch.Tensor, ratio: float, window: int) -> torch.Tensor:
    """Evict the same share `ratio` of every key head's prompt, lowest scores first.

    Each head keeps `int(n · (1 - ratio))` of its `n` prompt tokens (window included, as kvpress
    counts), so every head and layer gets the same budget.

    Parameters
    ----------
    scores : torch.Tensor
        `[B, Hkv, m]` scores of the keys before the window; `nan` marks padding.
    ratio : float
        Share of the prompt to evict, in `[0, 1)`.
    window : int
        Window length (the window is kept and counts towards the budget).

    Returns
    -------
    torch.Tensor
        `[B, Hkv, m]` bool.
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
    """Keep at most `budget` keys per batch row (and group), the protected ones first, then the highest scores.

    Parameters
    ----------
    scores : torch.Tensor
        `[..., m]` scores of every candidate key (the key heads of a layer flattened, so heads keep different
        shares of the budget); `nan` marks keys that are not there (padding), never kept.
    protected : torch.Tensor
        `[..., m]` bool, keys kept whatever their score (the window, the sinks); they count in the budget.
    budget : int
        Keys a row may keep.

    Returns
    -------
    torch.Tensor
        `[..., m]` bool.
    """
    present = ~scores.isnan()
    room = (budget - protected.sum(-1, keepdim=True)).clamp_min(0)  # [B, 1]
    ranked = scores.nan_to_num(float("-inf")).masked_fill(protected, float("-inf"))
    order = ranked.argsort(dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order).scatter_(
        -1, order, torch.arange(scores.shape[-1], device=scores.device).expand_as(order)
    )
    return protected | (present & ~protected & (rank < room))
