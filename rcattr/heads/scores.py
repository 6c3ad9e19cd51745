"""Head scores (docs/design.md §2 steps 1-2) and unsupervised head selection.

A head's score compares its cross-contextualization X = X(p_ctx, g), the logits from every answer
token to the context, with its self-contextualization Y = Y(g, g). Raw E[Z] is not comparable
across heads whose logits live on different scales (docs/design.md §6: on Qwen2.5 it picks early-layer
heads), so two scale-free scores are offered beside it; the default, P(X > Y), is the probability
of superiority, which needs only the counts of the shared sort + searchsorted kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from rcattr.options import HEAD_SCORES
from rcattr.stats.ranks import (
    count_below,
    count_below_row_sums,
    rank_and_phi_row_sums,
    sort_values,
    sorted_valid,
)

HeadScore = Literal["superiority", "rc_std", "rc"]
HeadCount = int | float  # a number of heads, or a fraction of all of them
OUTLIER_SIGMAS = 2.0  # outlier heads: those scoring more than this many standard deviations above the mean
MIN_HEAD_SHARE = 0.05  # a selection of fewer than this share of the model's heads is flagged (rounded up)
FULL_REACH = 1.0 - 1e-9  # a layer whose reach is at least this sees the whole context from the answer


@dataclass(frozen=True)
class LayerRC:
    """One layer's RC statistics against the answer's self-contextualization Y(g, g).

    Attributes
    ----------
    head_scores : Tensor, shape [H]
        The head score of each head (0 when no context pair is visible).
    every_score : dict of str to Tensor, shape [H]
        All three head scores (they share the sort), for comparing them.
    context_rc : Tensor, shape [H, A]
        Per answer row j, E[Z] with X = X(p_ctx, {j}) and Y = Y(g, g).
    self_rc : Tensor, shape [H, A]
        Per answer row j, the reverse E[Z'] = E[max(Y - X, 0)] of the same samples.
    context_peak : Tensor, shape [H, A]
        Per answer row j, P(max X > Y): the share of Y(g, g) below the row's highest context logit (0 for a
        row that sees no context). A token whose text is in the context has a head that finds it there.
    row_below : Tensor, shape [H, A]
        Per answer row, the sum over its visible context logits x of `#{y < x} / |Y|`.
    row_pairs : Tensor, shape [A]
        Per answer row, its number of visible context logits.
    y_std : Tensor, shape [H]
        The spread of Y(g, g), the scale of `rc_std`.
    n_self : int
        `|Y|`: the number of (row, answer key) pairs in Y(g, g), the denominator of `context_peak`.
    """

    head_scores: torch.Tensor
    context_rc: torch.Tensor
    self_rc: torch.Tensor
    context_peak: torch.Tensor
    every_score: dict[str, torch.Tensor]
    row_below: torch.Tensor
    row_pairs: torch.Tensor
    y_std: torch.Tensor
    n_self: int


@dataclass(frozen=True)
class LayerSuperiority:
    """One layer's P(X > Y) per head and per answer row: the default head score, from counts alone.

    Attributes
    ----------
    head_scores : Tensor of float64, shape [H]
    row_below : Tensor of float64, shape [H, A]
        As [`LayerRC.row_below`][rcattr.heads.scores.LayerRC].
    row_pairs : Tensor of float64, shape [A]
        As [`LayerRC.row_pairs`][rcattr.heads.scores.LayerRC].
    """

    head_scores: torch.Tensor
    row_below: torch.Tensor
    row_pairs: torch.Tensor

    @property
    def every_score(self) -> dict[str, torch.Tensor]:
        return {"superiority": self.head_scores}


def layer_superiority(
    cross: torch.Tensor,
    cross_visible: torch.Tensor,
    self_logits: torch.Tensor,
    self_visible: torch.Tensor,
) -> LayerSuperiority:
    """P(X > Y) of every head of one layer, as [`layer_rc`][rcattr.heads.scores.layer_rc] gives it, from counts alone.

    The ranks of the cross logits in the sorted Y(g, g) are exact integers, summed per row as they are
    found (`rcattr.stats.ranks.count_below_row_sums`): no partial sums, no copy of `[H, A, C]`, and
    `cross` may be a strided view of wider logits. Arguments as [`layer_rc`][rcattr.heads.scores.layer_rc]'s.
    """
    y, size = _self_sample(self_logits, self_visible)
    row_below = count_below_row_sums(cross, y, cross_visible).to(torch.float64) / size  # [H, A]
    row_pairs = cross_visible.sum(-1).to(torch.float64)  # [A]
    total = row_pairs.sum().clamp_min(1)
    return LayerSuperiority(row_below.sum(1) / total, row_below, row_pairs)


def _self_sample(self_logits: torch.Tensor, self_visible: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The answer's self sample Y(g, g) of every head, sorted with `+inf` in place of the hidden pairs
    (`[H, A * A]`; the rank kernels pass over `+inf` pads), and its size `|Y|` as a tensor: picking the
    visible logits alone would make the host wait for a GPU to count them, once a layer inside the forward."""
    return sorted_valid(self_logits.flatten(1), self_visible.flatten()), self_visible.sum()


def layer_rc(
    cross: torch.Tensor,
    cross_visible: torch.Tensor,
    self_logits: torch.Tensor,
    self_visible: torch.Tensor,
    kind: HeadScore = "superiority",
) -> LayerRC:
    """Score every head of one layer, and each answer row's context and self contextualization.

    One sort of Y(g, g) and one pass over the cross logits (`rcattr.stats.ranks.rank_and_phi_row_sums`)
    give all of it: the head score is a mean over all visible (row, context) pairs, the row statistics
    are means over each row.

    Parameters
    ----------
    cross : Tensor, shape [H, A, C]
        Logits from the `A` answer rows to the `C` context tokens.
    cross_visible : Tensor of bool, shape [A, C]
        Which of those pairs the model attends (a sliding window may hide far context).
    self_logits : Tensor, shape [H, A, A]
        Logits from the answer rows to the answer tokens.
    self_visible : Tensor of bool, shape [A, A]
        The causal (and windowed) pairs among them: the sample Y(g, g).
    kind : {"superiority", "rc_std", "rc"}
        `P(X > Y)`; `E[Z] / std(Y)`; or the raw `E[Z]` of the paper.
    """
    if kind not in HEAD_SCORES:
        raise ValueError(f"unknown head score {kind!r}; choose one of {list(HEAD_SCORES)}")
    y = sort_values(self_logits[:, self_visible])  # [H, |Y|]: the answer's self sample
    sums = rank_and_phi_row_sums(cross, y, cross_visible)  # [H, A] each
    n_row = cross_visible.sum(-1).to(torch.float64)  # [A]
    context_rc = sums.phi / n_row.clamp_min(1)  # [H, A]
    mean_x = sums.x / n_row.clamp_min(1)
    valid_y = y.to(torch.float64)
    self_rc = (context_rc - mean_x + valid_y.mean(1, keepdim=True)).clamp_min(0)  # E[Z] - E[Z'] = E[X] - E[Y]
    self_rc = self_rc * (n_row > 0)
    total = n_row.sum().clamp_min(1)
    rc = sums.phi.sum(1) / total
    row_below = sums.below.to(torch.float64) / y.shape[-1]  # [H, A]
    y_std = valid_y.std(dim=1, correction=0)
    scores = {
        "superiority": row_below.sum(1) / total,
        "rc_std": rc / y_std.clamp_min(torch.finfo(rc.dtype).tiny),
        "rc": rc,
    }
    return LayerRC(
        scores[kind],
        context_rc,
        self_rc,
        peak_superiority(cross, cross_visible, y),
        scores,
        row_below,
        n_row,
        y_std,
        y.shape[-1],
    )


def peak_superiority(
    cross: torch.Tensor, cross_visible: torch.Tensor, y_sorted: torch.Tensor
) -> torch.Tensor:
    """`[H, A]` P(max X > Y) per row: the share of the sorted `[H, |Y|]` sample below the row's highest
    visible logit of `cross [H, A, C]` (`cross_visible [A, C]`); 0 for a row that sees nothing."""
    peak = torch.where(cross_visible, cross, float("-inf")).amax(-1).contiguous()  # [H, A]
    return count_below(peak, y_sorted).to(torch.float64) / y_sorted.shape[-1]


def head_count(scores: torch.Tensor, k: HeadCount) -> int:
    """How many heads `k` selects from a `[L, H]` score table, checked: a number of heads, or a fraction
    of all heads (a float in `(0, 1]`). The outlier heads of an example are [`outlier_heads`][rcattr.heads.scores.outlier_heads]."""
    total = scores.numel()
    if isinstance(k, (bool, str)):
        raise ValueError(f"top_k={k!r}: give a number of heads or a fraction of them")
    if isinstance(k, float) and not 0 < k <= 1:
        raise ValueError(f"top_k={k!r} as a fraction of the model's {total} heads must be in (0, 1]")
    count = max(1, round(k * total)) if isinstance(k, float) else int(k)
    if not 1 <= count <= total:
        raise ValueError(
            f"top_k={k!r} selects {count} heads; the model has {total} (use 1..{total} or a fraction)"
        )
    return count


def outlier_count(scores: torch.Tensor, sigmas: float = OUTLIER_SIGMAS) -> int:
    """How many heads of a score table score more than `sigmas` standard deviations above the mean of
    all of them ([`outlier_heads`][rcattr.heads.scores.outlier_heads] selects them, or the best head when none does)."""
    flat = scores.flatten().double()
    return int((flat > flat.mean() + sigmas * flat.std(correction=0)).sum())


def min_heads(total: int) -> int:
    """The stated minimum of a selection from a model of `total` heads: `MIN_HEAD_SHARE` of them,
    rounded up (4 of Gemma-3-270m's 72, 14 of SmolLM2's 270, 17 of a 24 x 14 model), at least 1. A
    selection below it rests on few heads' votes, and the result says so
    ([`rcattr.heads.selection.HeadSelection.few_heads`][rcattr.heads.selection.HeadSelection.few_heads])."""
    return max(1, math.ceil(MIN_HEAD_SHARE * total - 1e-9))


def seeing_heads(reach: torch.Tensor, n_heads: int) -> torch.Tensor:
    """`[L, H]` bool: the heads a selection chooses among, from each layer's `[L]` reach (the share of
    the (answer token, context token) pairs its attention mask lets it see, `Reduction.context_reach`).

    Those are the heads of the layers that see the whole context from the answer; where none does (every
    layer's window is shorter than the distance), those of the layers that see the most of it. A head whose
    sliding window or attention chunk does not reach a source has no evidence about it, yet it would still
    score (on the part it sees) and vote (for what lies inside its window).
    """
    full = reach >= FULL_REACH
    layers = full if bool(full.any()) else reach >= reach.max()
    return layers[:, None].expand(-1, n_heads)


def top_heads(
    scores: torch.Tensor, k: HeadCount = 20, *, bottom: bool = False, among: torch.Tensor | None = None
) -> torch.Tensor:
    """The `k` best (or worst) heads of a `[layers, heads]` score table.

    Parameters
    ----------
    scores : Tensor, shape [L, H]
    k : int or float, default 20
        Number of heads, or a fraction of all heads when a float in `(0, 1]` ([`head_count`][rcattr.heads.scores.head_count]). Among
        fewer heads (`among`), it is capped to how many they are.
    bottom : bool, default False
        Take the lowest-scoring heads instead (the paper's ablation).
    among : Tensor of bool, shape [L, H], optional
        The heads to choose from ([`seeing_heads`][rcattr.heads.scores.seeing_heads]); None: all of them.

    Returns
    -------
    Tensor of long, shape [k, 2]
        `(layer, head)` pairs, best first (worst first with `bottom=True`).
    """
    count = head_count(scores, k)
    return _ranked(scores, lambda _: count, among, bottom=bottom)


def outlier_heads(
    scores: torch.Tensor,
    sigmas: float = OUTLIER_SIGMAS,
    *,
    at_least: int = 1,
    among: torch.Tensor | None = None,
) -> torch.Tensor:
    """The outlier heads of a `[layers, heads]` score table, best first: those whose score lies more than
    `sigmas` standard deviations above the mean of all the heads for this example ([`outlier_count`][rcattr.heads.scores.outlier_count]),
    and at least the `at_least` best ones (one by default).

    The outliers adapt to the model: on SmolLM2 (270 heads) they are about 19 heads, on Gemma-3-270m
    (72 heads) about 3, where a fixed 20 would take a quarter of the model. On a model whose scores have
    one far outlier they can be a single head; the attributor's result then says so ([`min_heads`][rcattr.heads.scores.min_heads]). A
    floor of 5% of the heads was measured and loses 9 points on Gemma's Veri-Gran (docs/benchmarks/attribution.md).
    Among fewer heads (`among`, [`seeing_heads`][rcattr.heads.scores.seeing_heads]), the outliers are those of these heads' scores.

    Returns
    -------
    Tensor of long, shape [k, 2]
        `(layer, head)` pairs.
    """
    return _ranked(scores, lambda values: max(outlier_count(values, sigmas), at_least), among)


def _ranked(
    scores: torch.Tensor,
    count: Callable[[torch.Tensor], int],
    among: torch.Tensor | None,
    *,
    bottom: bool = False,
) -> torch.Tensor:
    """The `count(values)` best (or worst) heads of `scores` among `among` (None: all), as pairs;
    `values` are the scores of the heads chosen among, and the count is capped to how many they are."""
    flat = scores.flatten()
    if among is None:
        chosen = flat.topk(min(count(scores), flat.numel()), largest=not bottom).indices
    else:
        pool = among.flatten().to(flat.device).nonzero()[:, 0]
        values = flat[pool]
        chosen = pool[values.topk(min(count(values), len(pool)), largest=not bottom).indices]
    n_heads = scores.shape[1]
    return torch.stack([chosen // n_heads, chosen % n_heads], dim=1)


def fixed_heads(heads: Sequence[tuple[int, int]], n_layers: int, n_heads: int) -> torch.Tensor:
    """A caller-given list of `(layer, head)` pairs as a `[k, 2]` tensor, checked against the model."""
    table = torch.as_tensor([list(pair) for pair in heads], dtype=torch.long).reshape(-1, 2)
    if table.numel() == 0:
        raise ValueError("heads is empty; give at least one (layer, head) pair")
    bad = (table[:, 0] < 0) | (table[:, 0] >= n_layers) | (table[:, 1] < 0) | (table[:, 1] >= n_heads)
    if bool(bad.any()):
        layer, head = table[bad][0].tolist()
        raise ValueError(
            f"head ({layer}, {head}) does not exist; the model has {n_layers} layers x {n_heads} heads"
        )
    return table


def peak_rows(
    logits: torch.Tensor, visible: torch.Tensor, context_keys: torch.Tensor, answer_start: int
) -> tuple[torch.Tensor, int]:
    """`[H, A]` each head's P(max X > Y) at each answer row (`#{y < max_c x_c} / |Y|`, x the row's visible
    context logits, Y the answer's self logits Y(g, g); 0 for a row that sees no context), and `|Y|`, from
    the `[H, A, S]` logits and their `[A, S]` visibility."""
    answer = slice(answer_start, answer_start + logits.shape[-2])
    y = sort_values(logits[..., answer][:, visible[:, answer]])  # [H, |Y|]
    is_context = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
    is_context[context_keys] = True  # a mask over every key: no copy of the context's columns
    return peak_superiority(logits, visible & is_context, y), y.shape[-1]
