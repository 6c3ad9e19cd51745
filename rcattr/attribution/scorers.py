"""Span scorers: how much each context span contributes to an output unit, per head.

Each scorer is a small dataclass with one method, `score(block) -> [U, H, n_spans]` (kvpress's
`ScorerPress` pattern). The attributor sums the scores of the selected heads and normalises them
over spans (RCStat Eq. 7). To add a scorer: subclass [`SpanScorer`][rcattr.attribution.scorers.SpanScorer] and implement `score`
(docs/extending.md). The paper's RC-expectation scorers, which measured below attention, are the benchmark's
(`rcattr.eval.attribution.rc_span_scorers`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import torch

from rcattr.attribution.spans import SpanBlock, continuation_weights


class SpanScorer(ABC):
    """Scores context spans for output units from one layer's logits.

    A scorer that pools each unit's rows into one sample (`pools_rows`, the default, as RC
    expectation and its bound do) gets one padded row set per unit. One that averages over rows
    (`pools_rows = False`, the attention scorer) gets every answer row once, with each unit's
    rows in [`SpanBlock.unit_rows`][rcattr.attribution.spans.SpanBlock], so that a row shared by several units (a token and the
    continuation of the token before it) is computed once. Either way `block.n_units` is `U`.
    """

    name: ClassVar[str] = ""
    pools_rows: ClassVar[bool] = True

    @abstractmethod
    def score(self, block: SpanBlock) -> torch.Tensor:
        """Non-negative span scores of shape `[U, H, n_spans]` for the `U` units of `block`."""


@dataclass
class AttentionScorer(SpanScorer):
    """Post-softmax attention mass from the unit's rows to each span, averaged over the rows.

    With RC head selection this is the paper's "standard attention-based attribution enhanced by
    RC head selection" (RCStat §5.2). The softmax runs over every key the row sees, exactly as the
    model's own, so the mass of a span is the share of the row's attention it receives: the sum of
    its tokens' mass ([`token_mass`][rcattr.attribution.scorers.AttentionScorer.token_mass]).

    Parameters
    ----------
    continuation : float in [0, 1), default 0.8
        Weight of the answer rows after the unit, up to the end of its sentence: the row `d`
        tokens after its last token counts `continuation ** d` (its own rows count 1). Right after
        a copied or paraphrased span the model still reads the source it came from, so these rows
        carry the unit's evidence on; a new sentence may draw on another source, so it does not
        count. 0 keeps the unit's own rows only (the paper).
    """

    continuation: float = 0.8
    name: ClassVar[str] = "attention"
    pools_rows: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not 0 <= self.continuation < 1:
            raise ValueError(f"continuation={self.continuation} must be in [0, 1)")

    def score(self, block: SpanBlock) -> torch.Tensor:
        return block.spans.sum(self.token_mass(block))

    def context_mass(self, block: SpanBlock) -> torch.Tensor:
        """`[U, H, R, C]`: each row's attention to each context token."""
        return block.attention().index_select(-1, block.context_keys)

    def token_mass(self, block: SpanBlock) -> torch.Tensor:
        """`[U, H, C]`: each context token's mass for each unit, averaged over the unit's rows."""
        mass = self.context_mass(block)  # [U, H, R, C]
        if block.unit_rows is not None:
            weights = continuation_weights(block.unit_rows, self.continuation, block.row_sentence)
            weights = weights.to(mass.dtype)
            return torch.einsum("ur,hrc->uhc", weights / weights.sum(-1, keepdim=True), mass[0])
        rows = block.visible.any(-1).sum(-1).to(mass.dtype)  # [U]
        return mass.sum(2) / rows[:, None, None]  # [U, H, C]


def scorer_name(scorer: SpanScorer) -> str:
    """The name a scorer's scores are kept under: its `name`, or its class name."""
    return getattr(scorer, "name", "") or type(scorer).__name__
