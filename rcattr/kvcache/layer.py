"""One full-attention layer of :class:`~rcattr.kvcache.RCKVCache`: a ``DynamicLayer`` whose key heads
keep different prompt tokens.

Storage stays transformers' ``[batch, kv_heads, slots, head_dim]``. After eviction each key head keeps
its own tokens, packed to the front of its row in their original order; shorter rows are padded to
the layer's longest one, and ``positions`` ``[batch, kv_heads, slots]`` records the sequence position
of every slot (-1 for a pad). Keys keep the RoPE of their original positions, and the cache reports
the uncompressed sequence length, so new tokens get the positions they would have had.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers.cache_utils import DynamicLayer

from rcattr._compat import mask_query_length
from rcattr.capture import mask_allows, raw_logits, visible_keys
from rcattr.kvcache.scoring import GroupReduce, adaptive_keep, fixed_ratio_keep, window_rc_scores

__all__ = ["Eviction", "EvictionPolicy", "RCLayer"]


@dataclass(frozen=True)
class EvictionPolicy:
    """How every layer of one cache decides (see :class:`~rcattr.kvcache.RCKVCache`)."""

    c: float = 1.0
    window: int = 16
    ratio: float | None = None
    group_reduce: GroupReduce = "mean"
    score_dtype: torch.dtype = torch.float32

    def keep(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``[B, Hkv, m]`` keep decision for the keys before the window, and the thresholds ``[B, Hkv]``
        (None in ``ratio`` mode)."""
        if self.ratio is not None:
            return fixed_ratio_keep(scores, self.ratio, self.window), None
        return adaptive_keep(scores, self.c)


@dataclass(frozen=True)
class Eviction:
    """What one layer decided at prefill, kept for analysis.

    Attributes
    ----------
    scores : torch.Tensor
        ``[B, Hkv, n]`` RC score of every prompt token; ``inf`` for the window, ``nan`` for padding.
    threshold : torch.Tensor or None
        ``[B, Hkv]`` the adaptive threshold ``c · mean score`` (None in ``ratio`` mode).
    kept : torch.Tensor
        ``[B, Hkv, n]`` bool, the prompt tokens each key head keeps.
    present : torch.Tensor
        ``[B, n]`` bool, the prompt tokens that are not padding.
    """

    scores: torch.Tensor
    threshold: torch.Tensor | None
    kept: torch.Tensor
    present: torch.Tensor

    @property
    def compression_ratio(self) -> torch.Tensor:
        """``[B, Hkv]`` share of each head's (non-padding) prompt tokens that were evicted."""
        prompt = self.present.sum(-1, keepdim=True).clamp_min(1)
        return 1.0 - self.kept.sum(-1) / prompt


class RCLayer(DynamicLayer):
    """A dynamic cache layer that evicts prompt tokens head by head after the prefill forward.

    Parameters
    ----------
    layer_idx : int
        The decoder layer this cache layer serves.
    policy : EvictionPolicy
        Window, threshold or ratio, and how key heads aggregate their query heads.
    """

    def __init__(self, layer_idx: int, policy: EvictionPolicy) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.policy = policy
        self.positions: torch.Tensor | None = None
        self.seen = 0
        self.eviction: Eviction | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        batch, kv_heads = key_states.shape[:2]
        self.positions = torch.empty(batch, kv_heads, 0, dtype=torch.int32, device=key_states.device)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens to every key head; return all stored keys and values (pads included)."""
        keys, values = super().update(key_states, value_states)
        batch, kv_heads, new = key_states.shape[:3]
        added = torch.arange(self.seen, self.seen + new, dtype=torch.int32, device=key_states.device)
        assert self.positions is not None
        self.positions = torch.cat([self.positions, added.expand(batch, kv_heads, new)], dim=-1)
        self.seen += new
        return keys, values

    def get_seq_length(self) -> int:
        """Tokens seen so far, evicted ones included: new tokens continue at this position."""
        return self.seen

    def get_mask_sizes(self, query: int | torch.Tensor) -> tuple[int, int]:  # type: ignore[override]
        """The model builds its mask over every position seen; :meth:`slot_mask` picks the stored ones."""
        return self.seen + mask_query_length(query), 0

    @property
    def prefilled(self) -> bool:
        """Whether the prefill forward has filled this layer (and eviction therefore has run)."""
        return self.eviction is not None

    @property
    def packed(self) -> bool:
        """Whether storage differs from positions ``0 .. seen - 1`` in every head (something was dropped)."""
        return self.eviction is not None and not bool(self.eviction.kept.all())

    def evict(self, query: torch.Tensor, attention_mask: torch.Tensor | None) -> None:
        """Score the prompt against its last ``window`` queries and drop what each head does not keep.

        Parameters
        ----------
        query : torch.Tensor
            ``[B, H, n, d]`` the prefill's queries (after RoPE and q-norm), as the attention got them.
        attention_mask : torch.Tensor or None
            The 4-D mask the attention got for the prefill (None: plain causality).
        """
        assert self.keys is not None and self.values is not None
        batch, kv_heads, n = self.keys.shape[:3]
        window = min(self.policy.window, n)
        device = query.device
        rows = torch.arange(n - window, n, device=device)
        visible = visible_keys(attention_mask, rows, rows, torch.arange(n, device=device))
        visible = visible.expand(batch, window, n)
        present = visible[:, -1]  # the last token attends to every real one
        if not bool(present[:, -1].all()):
            raise ValueError(
                "RCKVCache needs left padding: the last prompt token of some batch row is padding "
                "(set tokenizer.padding_side = 'left')"
            )
        if n > window:
            logits = raw_logits(query[:, :, -window:], self.keys, dtype=self.policy.score_dtype)
            before = window_rc_scores(
                logits,
                visible,
                kv_heads,
                group_reduce=self.policy.group_reduce,
                dtype=self.policy.score_dtype,
            )
            keep_before, threshold = self.policy.keep(before)
        else:  # the whole prompt is window
            before = self.keys.new_empty(batch, kv_heads, 0, dtype=self.policy.score_dtype)
            keep_before, threshold = before.bool(), None
        in_window = present[:, None, n - window :].expand(batch, kv_heads, window)
        kept = torch.cat([keep_before, in_window], dim=-1)
        window_scores = torch.full_like(before[..., :1], float("inf")).expand(batch, kv_heads, window)
        scores = torch.cat([before, window_scores.masked_fill(~in_window, float("nan"))], dim=-1)
        self.eviction = Eviction(scores=scores, threshold=threshold, kept=kept, present=present)
        if self.packed:
            self._pack(kept)

    def _pack(self, kept: torch.Tensor) -> None:
        """Keep the ``[B, Hkv, n]`` chosen slots of every row, in order, padded to the longest row."""
        assert self.keys is not None and self.values is not None
        counts = kept.sum(-1, keepdim=True)  # [B, Hkv, 1]
        slots = int(counts.max())
        order = (~kept).to(torch.uint8).argsort(dim=-1, stable=True)[..., :slots]  # kept first
        self.keys = self.keys.gather(2, order[..., None].expand(-1, -1, -1, self.keys.shape[-1]))
        self.values = self.values.gather(2, order[..., None].expand(-1, -1, -1, self.values.shape[-1]))
        is_slot = torch.arange(slots, device=kept.device) < counts
        self.positions = torch.where(is_slot, order, -1).to(torch.int32)

    def slot_mask(self, attention_mask: torch.Tensor | None, query_length: int, heads: int) -> torch.Tensor:
        """``[B, heads, q, slots]`` bool: which stored slot each new query attends to.

        The model's own mask over all positions seen (padding, causality) is read at each slot's
        position; pads and evicted tokens are never visible.
        """
        assert self.positions is not None
        positions = self.positions.long()  # [B, Hkv, S]
        batch, kv_heads, slots = positions.shape
        if attention_mask is None:
            queries = torch.arange(self.seen - query_length, self.seen, device=positions.device)
            visible = positions[:, :, None, :] <= queries[:, None]
        else:
            if attention_mask.dim() != 4 or attention_mask.shape[-1] != self.seen:
                raise NotImplementedError(
                    f"unexpected attention mask of shape {tuple(attention_mask.shape)} for {self.seen} "
                    "positions; RCKVCache supports 4-D [batch, 1, queries, positions] masks"
                )
            allows = mask_allows(attention_mask)[:, 0]  # [B or 1, q, seen]
            allows = allows[:, None].expand(batch, kv_heads, query_length, self.seen)
            index = positions.clamp_min(0)[:, :, None, :].expand(batch, kv_heads, query_length, slots)
            visible = allows.gather(-1, index)
        visible = visible & (positions >= 0)[:, :, None, :]
        return visible.repeat_interleave(heads // kv_heads, dim=1)

    def nbytes(self) -> int:
        """Bytes this layer holds: keys, values and slot positions."""
        tensors = (self.keys, self.values, self.positions)
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    def padding_nbytes(self) -> int:
        """Bytes of keys and values in pad slots (rows shorter than the layer's longest)."""
        if self.positions is None:
            return 0
        return int((self.positions < 0).sum()) * self._slot_nbytes()

    def full_nbytes(self) -> int:
        """Bytes a plain ``DynamicLayer`` would hold for the same tokens."""
        if self.positions is None:
            return 0
        batch, kv_heads = self.positions.shape[:2]
        return batch * kv_heads * self.seen * self._slot_nbytes()

    def _slot_nbytes(self) -> int:
        assert self.keys is not None and self.values is not None
        return (
            self.keys.shape[-1] * self.keys.element_size()
            + self.values.shape[-1] * self.values.element_size()
        )

    def _select(self, select: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply a batch re-indexing (beam search, batch expansion) to keys, values and positions."""
        for name in ("keys", "values", "positions"):
            tensor = getattr(self, name)
            if tensor is not None and tensor.numel():
                setattr(self, name, select(tensor))

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._select(lambda t: t.index_select(0, beam_idx.to(t.device)))

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._select(lambda t: t.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._select(lambda t: t[indices, ...])

    def crop(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError(
            "RCKVCache cannot be cropped (assisted or speculative decoding): evicted tokens cannot come back"
        )

    def reset(self) -> None:
        self.keys = self.values = self.positions = None
        self.is_initialized, self.seen, self.eviction = False, 0, None
