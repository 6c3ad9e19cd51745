"""Lexical evidence where the heads disagree: the selected heads' vote fused with BM25 shares, gated by how
much of the vote agrees with it.

Each selected head names one top span per output unit. Where they all name the vote's top span the vote
stands alone; where they scatter, the vote is uncertain and the lexical match of the unit's words to each
span ([`rcattr.attribution.lexical.bm25_scores`][rcattr.attribution.lexical.bm25_scores]) takes the share of the vote that disagreed. The gate is
the heads' own agreement, so nothing is fitted per model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rcattr.attribution.base import Example
from rcattr.attribution.lexical import bm25_scores
from rcattr.attribution.spans import normalise
from rcattr.attribution.voting import HeadEvidence, HeadVote, Voted


def head_agreement(evidence: torch.Tensor, weights: torch.Tensor | None, vote: torch.Tensor) -> torch.Tensor:
    """The weighted share of heads whose own top span is the vote's top span.

    Parameters
    ----------
    evidence : Tensor, shape [k, ..., S]
        Each selected head's span scores.
    weights : Tensor, shape [k], optional
        The heads' weights in the vote (None: equal).
    vote : Tensor, shape [..., S]
        Their combined vote.

    Returns
    -------
    Tensor of float64, shape [...]
        In [0, 1]; 1 when every head's top span is the vote's.
    """
    agrees = (evidence.argmax(-1) == vote.argmax(-1)[None]).to(torch.float64)  # [k, ...]
    if weights is None:
        weights = torch.ones(len(evidence), dtype=torch.float64, device=evidence.device)
    weights = weights.to(device=evidence.device, dtype=torch.float64)
    weights = weights / weights.sum().clamp_min(1e-30)
    return torch.einsum("k,k...->...", weights, agrees)


def lexical_fusion(vote: torch.Tensor, lexical: torch.Tensor, agreement: torch.Tensor) -> torch.Tensor:
    """`agreement * vote + (1 - agreement) * lexical shares`, over the last dim.

    Parameters
    ----------
    vote : Tensor, shape [..., S]
        The heads' vote, normalised over spans.
    lexical : Tensor, shape [..., S]
        Lexical scores (BM25: non-negative; a unit sharing no word with any span scores 0 everywhere and
        keeps its vote: BM25 has nothing to fill with).
    agreement : Tensor, shape [...]
        `head_agreement`.
    """
    lexical = lexical.double().clamp_min(0)
    silent = lexical.sum(-1) <= 0
    gate = torch.where(silent, 1.0, agreement.to(torch.float64))[..., None]
    return normalise(gate * vote.double() + (1 - gate) * normalise(lexical))


def fuse_where_heads_disagree(
    votes: tuple[torch.Tensor, torch.Tensor],
    evidence: tuple[torch.Tensor, torch.Tensor],
    weights: torch.Tensor | None,
    example: Example,
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The heads' answer and unit votes fused with the example's BM25 where the heads disagree.

    Parameters
    ----------
    votes : (Tensor [S], Tensor [U, S])
        The selected heads' answer and unit votes, normalised over spans.
    evidence : (Tensor [k, S], Tensor [k, U, S])
        Each selected head's answer and unit span scores.
    weights : Tensor, shape [k], optional
        The heads' weights in the votes.
    example : Example
        Its context spans and output units are BM25's corpus and queries ([`rcattr.attribution.lexical.bm25_scores`][rcattr.attribution.lexical.bm25_scores]).

    Returns
    -------
    answer : Tensor of float64, shape [S]
    units : Tensor of float64, shape [U, S]
    lexical_share : float
        The mean over units of `1 - agreement`: how much of the unit votes BM25 filled.
    """
    (answer, units), (answer_heads, unit_heads) = votes, evidence
    lexical_answer, lexical_units = bm25_scores(example)
    unit_agreement = head_agreement(unit_heads, weights, units)
    return (
        lexical_fusion(answer, lexical_answer, head_agreement(answer_heads, weights, answer)),
        lexical_fusion(units, lexical_units, unit_agreement),
        float((1 - unit_agreement).mean()),
    )


@dataclass(frozen=True)
class LexicalFusion(HeadVote):
    """The heads' vote, with BM25 filling the share of each unit's vote where the heads disagree
    (`fuse_where_heads_disagree`); the vote's `lexical_share` says how much it filled. `RCAttributor`'s default
    vote (`lexical=False` turns it off)."""

    def __call__(self, example: Example, evidence: HeadEvidence, weights: torch.Tensor | None) -> Voted:
        return Voted(
            *fuse_where_heads_disagree(
                self.combine(evidence, weights), (evidence.answer, evidence.units), weights, example
            )
        )
