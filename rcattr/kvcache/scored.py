"""What one evicting layer scored, before the rule decides ([`Rule.decide`][rcattr.kvcache.Rule.decide]
reads it), and how the decision is carried out on the layer's storage and recorded in its state: a chunk's
scores ([`ChunkScores`][rcattr.kvcache.scored.ChunkScores]) and a decode-time eviction's ([`DecodeScores`][rcattr.kvcache.scored.DecodeScores])."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from rcattr.kvcache.headwise import HeadwiseLayer
from rcattr.kvcache.state import DecodeRecord, Eviction, LayerState

__all__ = ["ChunkScores", "DecodeScores", "Scored"]


@dataclass(frozen=True)
class Scored(ABC):
    """What one layer scored, nothing decided yet; [`apply`][rcattr.kvcache.scored.Scored.apply] carries out a decision on it.

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

    @abstractmethod
    def apply(
        self, layer: HeadwiseLayer, state: LayerState, keep: torch.Tensor, threshold: torch.Tensor | None
    ) -> None:
        """Keep the `[B, S]` `keep` entries in `layer` and record the decision (`[B, Hkv]` thresholds,
        None for ratios and budgets) in its `state`."""


@dataclass(frozen=True)
class ChunkScores(Scored):
    """A chunk's scores (the keys before its window); `present [B, n]` marks its real tokens and
    `start` is the sequence position of its first."""

    present: torch.Tensor
    start: int

    def apply(
        self, layer: HeadwiseLayer, state: LayerState, keep: torch.Tensor, threshold: torch.Tensor | None
    ) -> None:
        """Record the decision on the chunk's keys before its window and evict the rest of the chunk (earlier
        slots stay)."""
        present, window = self.present, self.window
        batch, kv_heads = present.shape[0], len(self.slots)
        before = self.scores.view(batch, kv_heads, -1)
        in_window = present[:, None, present.shape[-1] - window :].expand(batch, kv_heads, window)
        kept = torch.cat([keep.view_as(before), in_window], dim=-1)
        window_scores = before.new_full((batch, kv_heads, window), float("inf"))
        scores = torch.cat([before, window_scores.masked_fill(~in_window, float("nan"))], dim=-1)
        state.evictions.append(Eviction(scores, threshold, kept, present, self.start))
        state.judged_until = layer.seen - window
        if not bool(kept.all()):
            n = kept.shape[-1]
            layer.keep_slots(
                [
                    torch.cat([positions[:, :-n] >= 0, kept[:, head]], dim=-1)
                    for head, (_, _, positions) in enumerate(layer.held())
                ]
            )


@dataclass(frozen=True)
class DecodeScores(Scored):
    """A decode-time eviction's scores of everything a layer holds (`window` 0: the windows are among the
    protected slots)."""

    def apply(
        self, layer: HeadwiseLayer, state: LayerState, keep: torch.Tensor, threshold: torch.Tensor | None
    ) -> None:
        """Keep the `keep` slots and record what each head holds."""
        layer.keep_slots(list(keep.split(self.slots, dim=-1)))
        seen, batch = layer.seen, keep.shape[0]
        held = torch.zeros(batch, layer.kv_heads, seen + 1, dtype=torch.bool, device=keep.device)  # +1: pads
        for head, (_, _, positions) in enumerate(layer.held()):
            held[:, head].scatter_(1, positions.long().masked_fill(positions < 0, seen), True)
        state.decode_evictions.append(DecodeRecord(seen, held[..., :seen], threshold))
        state.decoded, state.judged_until = 0, seen - state.recent.shape[-2]
