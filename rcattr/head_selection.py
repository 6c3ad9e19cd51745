"""The heads an attribution used (:class:`HeadSelection`), as a result carries them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rcattr.heads import MIN_HEAD_SHARE, OUTLIER_SIGMAS


@dataclass(frozen=True)
class HeadSelection:
    """The heads an attribution used and the scores they were chosen by.

    Attributes
    ----------
    scores : Tensor, shape [L, H]
        Every head's score (``kind``) for this example.
    heads : Tensor of long, shape [k, 2]
        The selected ``(layer, head)`` pairs.
    kind : str
        The head score (``"superiority"``, ``"rc_std"``, ``"rc"``), or ``"fixed"`` for given heads.
    weights : Tensor, shape [k], optional
        Each selected head's weight (None: all 1).
    outliers : int, optional
        With the outlier rule (:class:`~rcattr.selectors.OutlierHeads`), how many heads stood out from this example's scores.
    minimum : int, optional
        The stated minimum of a selection (:func:`rcattr.heads.min_heads`, 5% of the model's heads): fewer
        selected heads are flagged (:attr:`few_heads`).
    lexical_share : float, optional
        With ``RCAttributor(lexical=True)``, how much of the unit votes BM25 filled where the selected heads
        disagreed (mean over units of 1 - the heads' agreement; :mod:`rcattr.fusion`).
    """

    scores: torch.Tensor
    heads: torch.Tensor
    kind: str
    weights: torch.Tensor | None = None
    outliers: int | None = None
    minimum: int | None = None
    lexical_share: float | None = None

    def as_pairs(self) -> list[tuple[int, int]]:
        return [(int(layer), int(head)) for layer, head in self.heads.tolist()]

    @property
    def few_heads(self) -> bool:
        """Whether fewer heads were selected than the stated minimum: the attribution rests on few votes."""
        return self.minimum is not None and len(self.heads) < self.minimum

    def describe(self) -> str:
        """One sentence: how many heads were selected, by which score and rule, and whether they are few."""
        count = len(self.heads)
        text = f"{count} head{'' if count == 1 else 's'} selected by {self.kind}"
        if self.outliers is not None:
            text += f", the heads more than {OUTLIER_SIGMAS:g} sd above the mean head"
        if self.few_heads:
            text += (
                f"; fewer than {self.minimum} ({MIN_HEAD_SHARE:.0%} of the model's {self.scores.numel()}): "
                "the attribution rests on few heads' votes (a fixed top_k spreads it)"
            )
        if self.lexical_share is not None:
            text += f"; BM25 filled {self.lexical_share:.0%} of the votes, where the heads disagreed"
        return text
