"""What an evicting layer of [`RCKVCache`][rcattr.kvcache.cache.RCKVCache] has decided so far, kept by the cache for analysis
and for the next decode-time eviction (the layer itself only stores)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

__all__ = ["DecodeRecord", "Eviction", "LayerState"]


@dataclass(frozen=True)
class Eviction:
    """What one layer decided for one chunk (the prefill, or a later turn).

    Attributes
    ----------
    scores : torch.Tensor
        `[B, Hkv, n]` score of every token of the chunk; `inf` for the window, `nan` for padding.
    threshold : torch.Tensor or None
        `[B, Hkv]` the threshold `c · mean score` that applied to each key head (None for a ratio or a
        token budget).
    kept : torch.Tensor
        `[B, Hkv, n]` bool, the chunk's tokens each key head keeps.
    present : torch.Tensor
        `[B, n]` bool, the chunk's tokens that are not padding.
    start : int
        Sequence position of the chunk's first token (0 for the prefill).
    """

    scores: torch.Tensor
    threshold: torch.Tensor | None
    kept: torch.Tensor
    present: torch.Tensor
    start: int = 0

    @property
    def compression_ratio(self) -> torch.Tensor:
        """`[B, Hkv]` share of each head's (non-padding) prompt tokens that were evicted."""
        prompt = self.present.sum(-1, keepdim=True).clamp_min(1)
        return 1.0 - self.kept.sum(-1) / prompt

    @property
    def prompt_entries(self) -> int:
        """Non-padding prompt entries over all rows and key heads (before eviction)."""
        return int(self.present.sum()) * self.kept.shape[1]


@dataclass(frozen=True)
class DecodeRecord:
    """What one layer held after a decode-time eviction.

    Attributes
    ----------
    seen : int
        Tokens seen when it ran (it ran after the attention of token `seen - 1`).
    held : torch.Tensor
        `[B, Hkv, seen]` bool, the positions each key head holds afterwards.
    threshold : torch.Tensor or None
        `[B, Hkv]` the threshold that applied to each key head (None for a token budget).
    """

    seen: int
    held: torch.Tensor
    threshold: torch.Tensor | None


@dataclass
class LayerState:
    """One evicting layer's decisions and what decode-time eviction reads next.

    Attributes
    ----------
    evictions : list of Eviction
        One per chunk, the prefill's first.
    decode_evictions : list of DecodeRecord
        One per decode-time eviction.
    recent : torch.Tensor or None
        `[B, H, <= window, d]` the last queries the layer read (with decode-time eviction only).
    judged_until : int
        Entries before this position were judged by an eviction.
    decoded : int
        Tokens decoded since the last eviction.
    """

    evictions: list[Eviction] = field(default_factory=list)
    decode_evictions: list[DecodeRecord] = field(default_factory=list)
    recent: torch.Tensor = field(default_factory=lambda: torch.empty(0))
    judged_until: int = 0
    decoded: int = 0

    @property
    def prefilled(self) -> bool:
        """Whether the prefill has gone through the layer (and its eviction has run)."""
        return bool(self.evictions)

    def evicted_share(self) -> torch.Tensor:
        """`[B, Hkv]` share of each key head's (non-padding) chunk tokens evicted, over every chunk."""
        kept = sum(e.kept.sum(-1) for e in self.evictions)
        prompt = sum(e.present.sum(-1, keepdim=True) for e in self.evictions)
        return 1.0 - kept / prompt.clamp_min(1)  # type: ignore[union-attr]

    def entries(self) -> tuple[int, int]:
        """(kept, all) non-padding chunk entries over every chunk, row and key head."""
        kept = sum(int(e.kept.sum()) for e in self.evictions)
        return kept, sum(e.prompt_entries for e in self.evictions)

    def select(self, select: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply a batch re-indexing (beam search, batch expansion) to the query buffers."""
        for name, value in vars(self).items():
            if isinstance(value, torch.Tensor) and value.numel():
                setattr(self, name, select(value))
