"""The heads an attribution used ([`HeadSelection`][rcattr.heads.selection.HeadSelection]), as a result carries them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rcattr.heads.scores import FULL_REACH, MIN_HEAD_SHARE, OUTLIER_SIGMAS, min_heads, seeing_heads


@dataclass(frozen=True)
class HeadSelection:
    """The heads an attribution used and the scores they were chosen by.

    Attributes
    ----------
    scores : Tensor, shape [L, H]
        Every head's score (`kind`) for this example.
    heads : Tensor of long, shape [k, 2]
        The selected `(layer, head)` pairs.
    kind : str
        The head score (`"superiority"`, `"rc_std"`, `"rc"`), or `"fixed"` for given heads.
    weights : Tensor, shape [k], optional
        Each selected head's weight (None: all 1).
    outliers : int, optional
        With the outlier rule ([`OutlierHeads`][rcattr.heads.selectors.OutlierHeads]), how many heads stood out from this example's scores.
    minimum : int, optional
        The stated minimum of a selection ([`rcattr.heads.scores.min_heads`][rcattr.heads.scores.min_heads], 5% of the model's heads): fewer
        selected heads are flagged ([`few_heads`][rcattr.heads.selection.HeadSelection.few_heads]).
    reach : Tensor, shape [L], optional
        Each layer's view of the context from the answer: the share of the (answer token, context token)
        pairs its attention mask lets it see (1 for a full-attention layer; less for a sliding-window or
        chunked layer whose window does not reach the context). A selection chooses among the heads that see
        the whole context ([`rcattr.heads.scores.seeing_heads`][rcattr.heads.scores.seeing_heads]; [`seeing`][rcattr.heads.selection.HeadSelection.seeing] counts them).
    """

    scores: torch.Tensor
    heads: torch.Tensor
    kind: str
    weights: torch.Tensor | None = None
    outliers: int | None = None
    minimum: int | None = None
    reach: torch.Tensor | None = None

    def as_pairs(self) -> list[tuple[int, int]]:
        return [(int(layer), int(head)) for layer, head in self.heads.tolist()]

    @property
    def few_heads(self) -> bool:
        """Whether fewer heads were selected than the stated minimum: the attribution rests on few votes."""
        return self.minimum is not None and len(self.heads) < self.minimum

    @property
    def seeing(self) -> int | None:
        """How many heads see the whole context from the answer (None: the reach is not known)."""
        if self.reach is None:
            return None
        return int((self.reach >= FULL_REACH).sum()) * self.scores.shape[1]

    @property
    def few_seeing(self) -> bool:
        """Whether none, or fewer heads than the stated minimum ([`rcattr.heads.scores.min_heads`][rcattr.heads.scores.min_heads]), see the whole
        context from the answer: the attribution rests on few heads that can see the sources, or on none."""
        return self.seeing is not None and self.seeing < min_heads(self.scores.numel())

    def reach_note(self) -> str | None:
        """One clause on the heads that see the whole context from the answer; None when all of them do."""
        seeing, total = self.seeing, self.scores.numel()
        if self.reach is None or seeing == total:
            return None
        if seeing == 0:
            text = (
                "no head sees the whole context from the answer (their windows are shorter than the distance)"
            )
            if self.kind != "fixed":
                widest = int(seeing_heads(self.reach, self.scores.shape[1]).sum())
                text += f"; the heads were chosen among the {widest} that see the most of it"
                text += f" ({float(self.reach.max()):.0%})"
            return text
        text = f"{seeing} of the model's {total} heads see the whole context from the answer"
        text += " (the others' windows do not reach it)"
        if self.kind != "fixed":
            text += ", and the heads were chosen among them"
        if self.few_seeing:
            text += ": the attribution rests on few heads that can see the sources"
        return text

    def describe(self, lexical_share: float | None = None) -> str:
        """One sentence: how many heads were selected, by which score and rule, and whether they are few; with
        `lexical_share`, how much of the votes BM25 filled ([`RCSignals.lexical_share`][rcattr.record.signals.RCSignals]).
        """
        count = len(self.heads)
        text = f"{count} head{'' if count == 1 else 's'} selected by {self.kind}"
        if self.outliers is not None:
            text += f", the heads more than {OUTLIER_SIGMAS:g} sd above the mean head"
        if self.few_heads:
            text += (
                f"; fewer than {self.minimum} ({MIN_HEAD_SHARE:.0%} of the model's {self.scores.numel()}): "
                "the attribution rests on few heads' votes (a fixed top_k spreads it)"
            )
        if lexical_share is not None:
            text += f"; BM25 filled {lexical_share:.0%} of the votes, where the heads disagreed"
        reach = self.reach_note()
        if reach is not None:
            text += f"; {reach}"
        return text
