"""Head selection strategies: which heads' span scores an [`RCAttributor`][rcattr.attribution.attributor.RCAttributor] sums.

A selector is a small frozen dataclass (kvpress's press pattern): `score` names how heads are ranked,
and [`HeadSelector.select`][rcattr.heads.selectors.HeadSelector.select] turns this example's `[L, H]` head scores into a
[`HeadSelection`][rcattr.heads.selection.HeadSelection]. The attributor checks it once against the model
([`HeadSelector.for_model`][rcattr.heads.selectors.HeadSelector.for_model]). To add a rule: subclass [`HeadSelector`][rcattr.heads.selectors.HeadSelector] and implement
`select`, choosing among the heads that see the whole context ([`seeing_heads`][rcattr.heads.scores.seeing_heads] of the
`reach` it is given).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from rcattr.heads.scores import (
    HeadCount,
    HeadScore,
    fixed_heads,
    min_heads,
    outlier_count,
    outlier_heads,
    seeing_heads,
    top_heads,
)
from rcattr.heads.selection import HeadSelection
from rcattr.options import HEAD_SCORES, TopK

__all__ = ["FixedHeads", "HeadSelector", "OutlierHeads", "TopHeads", "heads_for"]


class HeadSelector(ABC):
    """Selects heads from every head's score for one example.

    Attributes
    ----------
    score : {"superiority", "rc_std", "rc"}
        How heads are ranked: `P(X > Y)` (default), `E[Z] / std(Y)` or the paper's raw `E[Z]`
        ([`rcattr.heads.scores`][rcattr.heads.scores]).
    """

    score: HeadScore

    def _check_score(self) -> None:
        if self.score not in HEAD_SCORES:
            raise ValueError(f"unknown head_score {self.score!r}; choose one of {list(HEAD_SCORES)}")

    def for_model(self, n_layers: int, n_heads: int) -> HeadSelector:
        """This selector checked against a model of `n_layers x n_heads` heads (may return a copy)."""
        return self

    @abstractmethod
    def select(self, scores: torch.Tensor, reach: torch.Tensor | None = None) -> HeadSelection:
        """The heads of a `[L, H]` score table (of kind `score`), chosen among those that see the whole
        context from the answer when each layer's `[L]` `reach` is given ([`seeing_heads`][rcattr.heads.scores.seeing_heads];
        the pass's `reach`)."""


def _among(scores: torch.Tensor, reach: torch.Tensor | None) -> torch.Tensor | None:
    """The `[L, H]` heads to choose among: those that see the context (None: all heads, or no reach known)."""
    if reach is None:
        return None
    seeing = seeing_heads(reach, scores.shape[1])
    return None if bool(seeing.all()) else seeing


def _checked_count(k: HeadCount, n_layers: int, n_heads: int) -> int | None:
    """Check `k` against the model's heads: the model's head count when `k` is above it (to cap it to,
    with a warning), else None."""
    total = n_layers * n_heads
    if isinstance(k, int) and not isinstance(k, bool) and k > total:
        warnings.warn(f"top_k={k} but the model has {total} heads; using all of them", stacklevel=4)
        return total
    top_heads(torch.zeros(n_layers, n_heads), k)  # raises on a bad count
    return None


@dataclass(frozen=True)
class OutlierHeads(HeadSelector):
    """The heads scoring more than two standard deviations above the mean of all heads for this example
    (at least one): about 19 of SmolLM2's 270 heads, 3 of Gemma-3-270m's 72 (rcattr's default).

    Parameters
    ----------
    score : {"superiority", "rc_std", "rc"}, default "superiority"
    """

    score: HeadScore = "superiority"

    def __post_init__(self) -> None:
        self._check_score()

    def select(self, scores: torch.Tensor, reach: torch.Tensor | None = None) -> HeadSelection:
        among = _among(scores, reach)
        heads = outlier_heads(scores, among=among)
        return HeadSelection(
            scores.cpu(),
            heads.cpu(),
            self.score,
            torch.ones(len(heads), dtype=scores.dtype),
            outliers=outlier_count(scores if among is None else scores[among.to(scores.device)]),
            minimum=min_heads(scores.numel()),
            reach=reach,
        )


@dataclass(frozen=True)
class TopHeads(HeadSelector):
    """The `k` best heads: a number, or a fraction of all heads (a float in `(0, 1]`).

    Parameters
    ----------
    k : int or float, default 20
        A count above the model's heads is capped to all of them, with a warning.
    score : {"superiority", "rc_std", "rc"}, default "superiority"
    """

    k: int | float = 20
    score: HeadScore = "superiority"

    def __post_init__(self) -> None:
        self._check_score()
        if isinstance(self.k, str):
            raise ValueError(
                f"top_k={self.k!r}: give a number of heads or a fraction of them (OutlierHeads())"
            )

    def for_model(self, n_layers: int, n_heads: int) -> TopHeads:
        capped = _checked_count(self.k, n_layers, n_heads)
        return self if capped is None else replace(self, k=capped)

    def select(self, scores: torch.Tensor, reach: torch.Tensor | None = None) -> HeadSelection:
        heads = top_heads(scores, self.k, among=_among(scores, reach))
        return HeadSelection(
            scores.cpu(),
            heads.cpu(),
            self.score,
            torch.ones(len(heads), dtype=scores.dtype),
            minimum=min_heads(scores.numel()),
            reach=reach,
        )


@dataclass(frozen=True)
class FixedHeads(HeadSelector):
    """Given `(layer, head)` pairs, whatever the scores (`score` still ranks them for the result).

    Parameters
    ----------
    heads : sequence of (int, int)
    score : {"superiority", "rc_std", "rc"}, default "superiority"
    """

    heads: Sequence[tuple[int, int]]
    score: HeadScore = "superiority"

    def __post_init__(self) -> None:
        self._check_score()

    def for_model(self, n_layers: int, n_heads: int) -> FixedHeads:
        fixed_heads(self.heads, n_layers, n_heads)  # raises on a head the model lacks
        return self

    def select(self, scores: torch.Tensor, reach: torch.Tensor | None = None) -> HeadSelection:
        """The given heads, whether they see the context or not (the selection's reach says)."""
        n_layers, n_heads = scores.shape
        heads = fixed_heads(self.heads, n_layers, n_heads)
        return HeadSelection(scores.cpu(), heads, "fixed", reach=reach)


def heads_for(top_k: TopK, score: HeadScore = "superiority") -> HeadSelector:
    """The selector of a command line's `--top-k` (`rcattr.options.parse_head_count`, a run's
    `top_k` setting): [`OutlierHeads`][rcattr.heads.selectors.OutlierHeads] for `"outliers"`, else [`TopHeads`][rcattr.heads.selectors.TopHeads] of a number (or
    fraction) of heads."""
    if top_k == "outliers":
        return OutlierHeads(score)
    if isinstance(top_k, str) or isinstance(top_k, bool):
        raise ValueError(f"top_k={top_k!r}: give a number of heads, a fraction of them, or 'outliers'")
    return TopHeads(top_k, score)
