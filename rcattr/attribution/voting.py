"""How the selected heads' span scores become an answer's and each output unit's scores (paper Eq. 7): a vote
strategy, one small object ([`HeadVote`][rcattr.attribution.voting.HeadVote]; [`LexicalFusion`][rcattr.attribution.fusion.LexicalFusion] lets BM25 fill where the
heads disagree)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch

from rcattr.attribution.base import Example
from rcattr.attribution.spans import normalise

__all__ = ["HEAD_VOTES", "HeadEvidence", "HeadVote", "HeadVotes", "Voted", "vote"]

HeadVotes = Literal["mass", "share"]
HEAD_VOTES: tuple[str, ...] = ("mass", "share")


def vote(evidence: torch.Tensor, weights: torch.Tensor | None, votes: HeadVotes) -> torch.Tensor:
    """The selected heads' `[k, ..., S]` span scores summed with `[k]` weights (None: 1 each) and
    normalised over the spans: by mass (paper Eq. 7), or each head's share over the spans first."""
    if votes not in HEAD_VOTES:
        raise ValueError(f"unknown votes {votes!r}; choose one of {list(HEAD_VOTES)}")
    if votes == "share":
        evidence = normalise(evidence)
    if weights is None:
        weights = torch.ones(len(evidence), device=evidence.device)
    weights = weights.to(device=evidence.device, dtype=evidence.dtype)
    summed = (
        torch.einsum("k,ks->s", weights, evidence)
        if evidence.ndim == 2
        else torch.einsum("k,kus->us", weights, evidence)
    )
    return normalise(summed)


class HeadEvidence(NamedTuple):
    """Each selected head's span scores: `answer [k, S]` for the whole answer, `units [k, U, S]` per output
    unit."""

    answer: torch.Tensor
    units: torch.Tensor


class Voted(NamedTuple):
    """A vote's `seq_attr [S]` and `token_attr [U, S]`, and how much of it BM25 filled where the heads
    disagreed ([`LexicalFusion`][rcattr.attribution.fusion.LexicalFusion]; None for a vote of the heads alone)."""

    seq_attr: torch.Tensor
    token_attr: torch.Tensor
    lexical_share: float | None = None


@dataclass(frozen=True)
class HeadVote:
    """The selected heads' span scores summed with their weights and normalised over the spans.

    Parameters
    ----------
    votes : {"share", "mass"}, default "share"
        Sum each head's share over the spans, so that a head that attends more does not outvote the others,
        or the heads' mass (paper Eq. 7).
    """

    votes: HeadVotes = "share"

    def __post_init__(self) -> None:
        if self.votes not in HEAD_VOTES:
            raise ValueError(f"unknown votes {self.votes!r}; choose one of {list(HEAD_VOTES)}")

    def combine(
        self, evidence: HeadEvidence, weights: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The `[S]` answer and `[U, S]` unit votes of the heads' evidence, with `[k]` weights (None: 1)."""
        return vote(evidence.answer, weights, self.votes), vote(evidence.units, weights, self.votes)

    def __call__(self, example: Example, evidence: HeadEvidence, weights: torch.Tensor | None) -> Voted:
        """The final scores of `example` from the selected heads' `evidence` and `[k]` weights: their
        [`combine`][rcattr.attribution.voting.HeadVote.combine]-d votes (a subclass completes them, as [`LexicalFusion`][rcattr.attribution.fusion.LexicalFusion]
        does)."""
        return Voted(*self.combine(evidence, weights))
