"""What one evicting layer scored, as plain data, before the rule decides ([`Rule.decide`][rcattr.kvcache.Rule.decide]
reads it): a chunk's scores ([`ChunkScores`][rcattr.kvcache.scored.ChunkScores]) and a decode-time eviction's
([`DecodeScores`][rcattr.kvcache.scored.DecodeScores]). The layer carries out the decision
([`RCLayer.cut`][rcattr.kvcache.layer.RCLayer.cut])."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["ChunkScores", "DecodeScores", "Scored"]


@dataclass(frozen=True)
class Scored:
    """What one layer scored, nothing decided yet.

    Attributes
    ----------
    scores : torch.Tensor
        `[B, S]` score of every candidate, the key heads one after the other; `nan` for what is not a
        candidate (padding, and at decode time the windows, sinks, pads and what is not judged again).
    protected : torch.Tensor
        `[B, S]` bool, the entries kept whatever their score.
    slots : list of int
        Entries of each key head in `scores`.
    window : int
        Entries each key head holds besides its `slots` that count in a ratio or a budget (the chunk's
        window; 0 at decode time, where the windows are among the protected slots).
    """

    scores: torch.Tensor
    protected: torch.Tensor
    slots: list[int]
    window: int


@dataclass(frozen=True)
class ChunkScores(Scored):
    """A chunk's scores (the keys before its window); `present [B, n]` marks its real tokens and
    `start` is the sequence position of its first."""

    present: torch.Tensor
    start: int


@dataclass(frozen=True)
class DecodeScores(Scored):
    """A decode-time eviction's scores of everything a layer holds (`window` 0: the windows are among the
    protected slots)."""
