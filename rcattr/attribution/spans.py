"""What a span scorer sees of one layer: the logits of the rows being explained, and the span layout.

[`SpanIndex`][rcattr.attribution.spans.SpanIndex] says which context tokens make up each context span (a token may belong to two
spans when it straddles their boundary). [`SpanBlock`][rcattr.attribution.spans.SpanBlock] holds one layer's raw logits for a
batch of output units (answer, sentences or tokens, padded to equal length) and offers the pieces
every scorer needs: the cross logits X(P, G'), the self logits Y(g, G') and their visibility.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import torch


@dataclass(frozen=True)
class SpanIndex:
    """Membership of context tokens in context spans.

    Attributes
    ----------
    span : Tensor of long, shape [P]
        Span id of each (span, token) pair.
    member : Tensor of long, shape [P]
        Context token of each pair, as an index into the context keys `[C]`.
    n_spans : int
    """

    span: torch.Tensor
    member: torch.Tensor
    n_spans: int

    @classmethod
    def from_ranges(cls, ranges: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> SpanIndex:
        """From each span's context-token indices."""
        span = torch.cat([torch.full((len(r),), i, dtype=torch.long) for i, r in enumerate(ranges)])
        member = torch.cat([torch.as_tensor(list(r), dtype=torch.long) for r in ranges])
        return cls(span.to(device), member.to(device), len(ranges))

    def sum(self, per_token: torch.Tensor) -> torch.Tensor:
        """Sum `[..., C]` per-token values over each span: `[..., n_spans]`."""
        out = per_token.new_zeros((*per_token.shape[:-1], self.n_spans))
        return out.index_add_(-1, self.span, per_token.index_select(-1, self.member))

    def mean(self, total: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        """Block means from per-token sums and counts `[..., C]`; 0 for a span with no sample."""
        counts = self.sum(count)
        return self.sum(total) / counts.clamp_min(1)

    @cached_property
    def padded(self) -> tuple[torch.Tensor, torch.Tensor]:
        """`([n_spans, longest], mask)`: each span's context tokens, padded with token 0."""
        sizes = torch.bincount(self.span, minlength=self.n_spans)
        width = int(sizes.max())
        order = torch.argsort(self.span, stable=True)
        slot = (
            torch.arange(len(self.span), device=self.span.device)
            - (torch.cumsum(sizes, 0) - sizes)[self.span[order]]
        )
        index = torch.zeros(self.n_spans, width, dtype=torch.long, device=self.span.device)
        mask = torch.zeros(self.n_spans, width, dtype=torch.bool, device=self.span.device)
        index[self.span[order], slot] = self.member[order]
        mask[self.span[order], slot] = True
        return index, mask

    def by_width(self) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """The spans in groups whose lengths lie within a factor of two, each padded to its own longest.

        Returns `(spans [s], index [s, W], mask [s, W])` per group, as [`padded`][rcattr.attribution.spans.SpanIndex.padded] for those spans:
        a few long spans no longer pad every short one, so the padding is at most the spans' own size.
        Spans without a token (an empty document's) are in no group: nothing to score.
        """
        index, mask = self.padded
        sizes = mask.sum(-1)
        width_class = torch.log2(sizes.clamp_min(1).double()).ceil().long().masked_fill(sizes == 0, -1)
        groups = []
        for value in width_class.unique().tolist():
            if value < 0:
                continue
            spans = (width_class == value).nonzero().flatten()
            width = int(sizes[spans].max())
            groups.append((spans, index[spans, :width], mask[spans, :width]))
        return groups


def continuation_weights(
    unit_rows: torch.Tensor, decay: float, row_sentence: torch.Tensor | None = None
) -> torch.Tensor:
    """Row weights of output units: 1 on a unit's own rows, `decay ** d` on the row `d` tokens
    after its last one (the answer's continuation) up to the end of that row's sentence, 0 elsewhere.

    Parameters
    ----------
    unit_rows : Tensor of bool, shape [U, R]
    decay : float in [0, 1)
    row_sentence : Tensor of long, shape [R], optional
        The answer sentence of each row (-1: none). The continuation stays in the sentence of the
        unit's last row; None lets it run to the end of the answer.

    Returns
    -------
    Tensor, shape [U, R]
    """
    positions = torch.arange(unit_rows.shape[-1], device=unit_rows.device)
    last = torch.where(unit_rows, positions, -1).max(-1, keepdim=True).values  # [U, 1]
    after = (positions - last).clamp_min(0).to(torch.float64)
    following = torch.where(after > 0, torch.tensor(decay, dtype=torch.float64).pow(after), 0.0)
    if row_sentence is not None:
        own = row_sentence[last.clamp_min(0)]  # [U, 1]
        following = following * ((row_sentence == own) & (own >= 0))
    return torch.where(unit_rows, 1.0, following)


@dataclass(frozen=True)
class SpanBlock:
    """One layer's logits for `U` output units, each padded to `R` rows.

    Attributes
    ----------
    logits : Tensor, shape [U, H, R, K]
        Raw logits `<q_j, k_i>` of each unit's rows (unscaled, post-RoPE) against every key.
    visible : Tensor of bool, shape [U, R, K]
        Which keys each row attends to; all False on padding rows.
    context_keys : Tensor of long, shape [C]
        Key indices of the attributed context tokens.
    answer_keys : Tensor of long, shape [A]
        Key indices of the answer tokens (the self sample Y).
    spans : SpanIndex
        Context spans over the `C` context tokens.
    scaling : float
        The layer's softmax scale (`1/sqrt(d)` for most models).
    softcap : float or None
        Logit soft-capping of the layer, if any.
    unit_rows : Tensor of bool, shape [U', R], optional
        For a block holding every answer row once (`U = 1`): the rows of each of `U'` output
        units. None: each of the `U` padded row sets is one unit.
    row_sentence : Tensor of long, shape [R], optional
        With `unit_rows`: the answer sentence of each row (-1 for none).
    """

    logits: torch.Tensor
    visible: torch.Tensor
    context_keys: torch.Tensor
    answer_keys: torch.Tensor
    spans: SpanIndex
    scaling: float
    softcap: float | None = None
    unit_rows: torch.Tensor | None = None
    row_sentence: torch.Tensor | None = None

    @property
    def n_units(self) -> int:
        """`U`: the output units the block's scores are for."""
        return self.logits.shape[0] if self.unit_rows is None else self.unit_rows.shape[0]

    @cached_property
    def cross(self) -> tuple[torch.Tensor, torch.Tensor]:
        """X(P, G'): `[U, H, R, C]` logits to the context tokens and `[U, 1, R, C]` visibility."""
        return self.logits.index_select(-1, self.context_keys), self.visible.index_select(
            -1, self.context_keys
        )[:, None]

    @cached_property
    def self_sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Y(g, G'): `[U, H, R * A]` logits to the answer tokens and `[U, 1, R * A]` validity."""
        logits = self.logits.index_select(-1, self.answer_keys).flatten(2)
        visible = self.visible.index_select(-1, self.answer_keys).flatten(1)[:, None]
        return logits, visible

    def attention(self) -> torch.Tensor:
        """Post-softmax attention `[U, H, R, K]` exactly as the model computes it (0 on padding rows)."""
        return attention_probabilities(self.logits, self.visible, self.scaling, self.softcap)


def attention_probabilities(
    logits: torch.Tensor, visible: torch.Tensor, scaling: float, softcap: float | None = None
) -> torch.Tensor:
    """The model's post-softmax attention `[B, H, R, K]` from raw logits `[B, H, R, K]` and their
    `[B, R, K]` visibility (0 on rows that see nothing)."""
    scores = logits * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    scores = torch.where(visible[:, None], scores, float("-inf"))  # faster than masked_fill on the CPU
    return torch.softmax(scores, dim=-1).nan_to_num_(0.0)


def lookback_ratio(
    attention: torch.Tensor, visible: torch.Tensor, context_keys: torch.Tensor, answer_keys: torch.Tensor
) -> torch.Tensor:
    """The lookback ratio (Chuang et al. 2024, "Lookback Lens") of each head at each row: `a_ctx / (a_ctx +
    a_ans)`, `a_ctx` the mean attention on a context token, `a_ans` the mean attention on an answer token
    the row sees (itself included).

    Parameters
    ----------
    attention : Tensor, shape [H, R, K]
        Post-softmax attention of `R` answer rows.
    visible : Tensor of bool, shape [R, K]
    context_keys, answer_keys : Tensor of long, shapes [C] and [A]
        Key indices of the context tokens and of the answer tokens.

    Returns
    -------
    Tensor of float32, shape [H, R]
    """
    weights = attention.new_zeros(attention.shape[-1], 2)  # one product, not two index copies of [H, R, K]
    weights[context_keys, 0] = 1 / max(len(context_keys), 1)
    weights[answer_keys, 1] = 1
    on_context, on_answer = (attention @ weights).unbind(-1)  # [H, R]
    on_answer = on_answer / visible[:, answer_keys].sum(-1).clamp_min(1)
    return (on_context / (on_context + on_answer).clamp_min(1e-30)).float()


def unit_sum(per_token: torch.Tensor, unit_ranges: Sequence[range]) -> torch.Tensor:
    """`[A, ...]` per-answer-token values summed over each output unit: `[U, ...]`."""
    return torch.stack([per_token[list(rows)].sum(0) for rows in unit_ranges])


def span_sum(per_position: torch.Tensor, context_ranges: Sequence[Sequence[int]]) -> torch.Tensor:
    """`[..., P]` per-prompt-position values summed over each context span: `[..., n_spans]`."""
    return torch.stack([per_position[..., list(r)].sum(-1) for r in context_ranges], dim=-1)


def normalise(scores: torch.Tensor) -> torch.Tensor:
    """Scores over the last dim divided by their sum (paper Eq. 7); all-zero rows stay zero."""
    total = scores.sum(-1, keepdim=True)
    return scores / torch.where(total > 0, total, torch.ones_like(total))


def lookback_rows(
    logits: torch.Tensor,
    visible: torch.Tensor,
    scaling: float,
    softcap: float | None,
    context_keys: torch.Tensor,
    answer_start: int,
) -> torch.Tensor:
    """`[H, A]` each head's lookback ratio at each answer row, from its `[H, A, S]` raw logits (the
    layer's `scaling` and `softcap` applied here) and their `[A, S]` visibility: `a_ctx / (a_ctx + a_ans)`,
    `a_ctx` the mean attention on a context token, `a_ans` the mean attention on an answer token the row
    sees (itself included)."""
    answer_keys = torch.arange(answer_start, answer_start + logits.shape[-2], device=logits.device)
    attention = attention_probabilities(logits[None], visible[None], scaling, softcap)[0]
    return lookback_ratio(attention, visible, context_keys, answer_keys)
