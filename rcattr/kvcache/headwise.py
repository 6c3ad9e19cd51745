"""The storage of [`RCLayer`][rcattr.kvcache.layer.RCLayer]: a `DynamicLayer` whose key heads may hold different tokens.
It stores and attends; [`RCLayer`][rcattr.kvcache.layer.RCLayer] adds what to evict ([`rcattr.kvcache.eviction`][rcattr.kvcache.eviction]).

Until something is evicted, storage is transformers' `[batch, kv_heads, seq, head_dim]`. After eviction
the key heads hold different numbers of tokens, so they are stored one after the other in
`[batch, 1, slots, head_dim]` (AdaKV's flattened layout): head g owns the segment `head_slots[g]` long,
its tokens in their original order. Only batch rows that keep fewer tokens than the longest row of the
same head are padded. `positions` `[batch, 1 or kv_heads, slots]` records the sequence position of
every slot (-1 for a pad). Keys keep the RoPE of their original positions, and the layer reports the
uncompressed sequence length, so new tokens get the positions they would have had.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate

import torch
from transformers.cache_utils import DynamicLayer

from rcattr.runtime.attention import AttentionCall
from rcattr.runtime.compat import mask_query_length

__all__ = ["HeadwiseLayer"]

Held = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class HeadwiseLayer(DynamicLayer):
    """A dynamic cache layer whose key heads hold different tokens once something is evicted."""

    is_croppable = False  # evicted tokens cannot come back

    def __init__(self) -> None:
        super().__init__()
        self.positions = torch.empty(0, dtype=torch.int32)
        self.head_slots: list[int] | None = None  # set once heads hold different tokens
        self.has_pads = False
        self.kv_heads = 0
        self.seen = 0
        # the attention input [B, n, d] of the forward being stored, for a scorer that reads it (set by the
        # cache's hook, dropped once the layer has scored)
        self.hidden: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        batch, self.kv_heads = key_states.shape[:2]
        self.positions = torch.empty(batch, self.kv_heads, 0, dtype=torch.int32, device=key_states.device)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens to every key head; return everything stored (see the module docstring)."""
        batch, kv_heads, new = key_states.shape[:3]
        added = torch.arange(self.seen, self.seen + new, dtype=torch.int32, device=key_states.device)
        added = added.expand(batch, kv_heads, new)
        self.seen += new
        if self.head_slots is None:
            keys, values = super().update(key_states, value_states)
            self.positions = torch.cat([self.positions, added], dim=-1)
            return keys, values
        stored_keys, stored_values, positions = self._stored()
        self.keys = _append_per_head(stored_keys, key_states, self.head_slots)
        self.values = _append_per_head(stored_values, value_states, self.head_slots)
        self.positions = _append_per_head(positions[..., None], added[..., None], self.head_slots)[..., 0]
        self.head_slots = [slots + new for slots in self.head_slots]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        """Tokens seen so far, evicted ones included: new tokens continue at this position."""
        return self.seen

    def get_mask_sizes(self, query: int | torch.Tensor) -> tuple[int, int]:  # type: ignore[override]
        """The model builds its mask over every position seen; [`attend`][rcattr.kvcache.headwise.HeadwiseLayer.attend] picks the stored ones."""
        return self.seen + mask_query_length(query), 0

    @property
    def packed(self) -> bool:
        """Whether the heads are stored one after the other (something was evicted)."""
        return self.head_slots is not None

    def _stored(self) -> Held:
        if self.keys is None or self.values is None:
            raise RuntimeError("this cache layer holds nothing yet")
        return self.keys, self.values, self.positions

    def segments(self) -> list[slice]:
        """The slots of each key head: its segment in the packed layout, all of its row before."""
        if self.head_slots is None:
            return [slice(0, self.seen)] * self.kv_heads
        ends = accumulate(self.head_slots)
        return [slice(end - n, end) for n, end in zip(self.head_slots, ends, strict=True)]

    def held(self) -> list[Held]:
        """Per key head, its `[B, S, d]` keys and values and `[B, S]` positions (-1: pad slot)."""
        keys, values, positions = self._stored()
        if self.head_slots is None:
            return [(keys[:, h], values[:, h], positions[:, h]) for h in range(self.kv_heads)]
        return [(keys[:, 0, seg], values[:, 0, seg], positions[:, 0, seg]) for seg in self.segments()]

    def kept_indices(self) -> list[torch.Tensor]:
        """Per key head, `[B, slots]` the sequence position held in each of its slots (-1: pad)."""
        return [positions.long() for _, _, positions in self.held()]

    def chunk(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`[B, Hkv, n, d]` keys and values of the last `n` tokens stored (the chunk just fed)."""
        keys, values, _ = self._stored()
        if self.head_slots is None:
            return keys[:, :, -n:], values[:, :, -n:]
        held = self.held()
        return torch.stack([k[:, -n:] for k, _, _ in held], 1), torch.stack(
            [v[:, -n:] for _, v, _ in held], 1
        )

    def keep_slots(self, keeps: list[torch.Tensor]) -> None:
        """Keep the `[B, S]` `keeps[g]` slots of every key head g and store the heads one after the
        other; a row that keeps fewer slots than its head's longest row is padded."""
        keys, values, positions, head_slots = [], [], [], []
        for (head_keys, head_values, head_positions), keep in zip(self.held(), keeps, strict=True):
            counts = keep.sum(-1)
            slots = int(counts.max())
            index = (
                (~keep).to(torch.uint8).argsort(dim=-1, stable=True)[:, :slots]
            )  # kept slots first, in order
            keys.append(head_keys.gather(1, index[..., None].expand(-1, -1, head_keys.shape[-1])))
            values.append(head_values.gather(1, index[..., None].expand(-1, -1, head_values.shape[-1])))
            is_slot = torch.arange(slots, device=keep.device) < counts[:, None]
            positions.append(torch.where(is_slot, head_positions.gather(1, index), -1))
            head_slots.append(slots)
        self.keys, self.values = torch.cat(keys, dim=1)[:, None], torch.cat(values, dim=1)[:, None]
        self.positions = torch.cat(positions, dim=1)[:, None].to(torch.int32)
        self.head_slots = head_slots
        self.has_pads = bool((self.positions < 0).any())

    def attend(self, call: AttentionCall) -> torch.Tensor:
        """`[B, q, H, d]` the attention of `call`'s queries over the packed slots, one kernel call per key
        head on its query heads and its own slots, each slot visible where the model's mask allows at its
        position (pads and evicted tokens never): the model's kernel, but for one query (decoding) torch's
        sdpa with the head's query heads as the rows of one head ([`_attend_folded`][rcattr.kvcache.headwise._attend_folded]). One call over
        every head (a mask over the packed slots, or the segments padded) was slower on the CPU
        (`benchmarks/bench_headwise_attention.py`)."""
        visible = _visible_slots(self, call)
        if call.query.shape[-2] == 1 and call.softcap is None:
            return _attend_folded(self, call, visible)
        return _attend_per_head(self, call, visible)

    def nbytes(self) -> int:
        """Bytes this layer holds: keys, values and slot positions."""
        tensors = (self.keys, self.values, self.positions)
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    def padding_nbytes(self) -> int:
        """Bytes of keys and values in pad slots (batch rows shorter than their head's longest row)."""
        return int((self.positions < 0).sum()) * self.slot_nbytes() if self.is_initialized else 0

    def full_nbytes(self) -> int:
        """Bytes a plain `DynamicLayer` would hold for the same tokens."""
        if not self.is_initialized:
            return 0
        return self.positions.shape[0] * self.kv_heads * self.seen * self.slot_nbytes()

    def slot_nbytes(self) -> int:
        """Bytes of one slot's key and value."""
        keys, values, _ = self._stored()
        return keys.shape[-1] * keys.element_size() + values.shape[-1] * values.element_size()

    def select_rows(self, select: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply a batch re-indexing (beam search, batch expansion) to keys, values and positions."""
        for name in ("keys", "values", "positions"):
            tensor = getattr(self, name)
            if tensor is not None and tensor.numel():
                setattr(self, name, select(tensor))

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.select_rows(lambda t: t.index_select(0, beam_idx.to(t.device)))

    def batch_repeat_interleave(self, repeats: int) -> None:
        self.select_rows(lambda t: t.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.select_rows(lambda t: t[indices, ...])

    def crop(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError(
            "RCKVCache cannot be cropped (assisted or speculative decoding): evicted tokens cannot come back"
        )

    def reset(self) -> None:
        self.keys = self.values = None
        self.positions = torch.empty(0, dtype=torch.int32)
        self.head_slots, self.has_pads, self.is_initialized, self.seen = None, False, False, 0


def _visible_slots(layer: HeadwiseLayer, call: AttentionCall) -> torch.Tensor | None:
    """`[B, 1, q, S]` bool: which packed slots each query may see, where the model's mask allows at the
    slot's position (pads never); None where every slot is visible (one query, no mask, no pads)."""
    query, q_len = call.query, call.query.shape[-2]
    if call.attention_mask is None and q_len == 1 and not layer.has_pads:
        return None
    positions = layer.positions.long()  # [B, 1, S]
    batch, _, slots = positions.shape
    rows = torch.arange(q_len, device=query.device)
    every = call.visible(rows, torch.arange(layer.seen, device=query.device))  # [B or 1, q, seen]
    index = positions.clamp_min(0).expand(batch, q_len, slots)
    visible = every.expand(batch, q_len, layer.seen).gather(-1, index)[:, None]
    return visible & (positions >= 0)[:, :, None, :]


def _attend_per_head(layer: HeadwiseLayer, call: AttentionCall, visible: torch.Tensor | None) -> torch.Tensor:
    """`[B, q, H, d]`: one call of the model's kernel per key head, on its query heads and its segment;
    `visible [B, 1, q, S]` from [`_visible_slots`][rcattr.kvcache.headwise._visible_slots]."""
    query = call.query
    group = query.shape[1] // layer.kv_heads
    outputs = [
        call.attend(
            query[:, head * group : (head + 1) * group],
            call.key[:, :, segment],
            call.value[:, :, segment],
            None if visible is None else visible[..., segment],
        )
        for head, segment in enumerate(layer.segments())
    ]
    return torch.cat(outputs, dim=2)


def _attend_folded(layer: HeadwiseLayer, call: AttentionCall, visible: torch.Tensor | None) -> torch.Tensor:
    """`[B, 1, H, d]` for one query, as [`_attend_per_head`][rcattr.kvcache.headwise._attend_per_head] gives it: one call of torch's sdpa per key
    head, the group's query heads folded into the rows of one head. Transformers' sdpa takes its GQA path for
    one query without a mask, 1.3-3x slower on the CPU (`benchmarks/bench_headwise_attention.py`)."""
    query = call.query
    batch, heads, _, dim = query.shape
    group = heads // layer.kv_heads
    outputs = [
        torch.nn.functional.scaled_dot_product_attention(
            query[:, head * group : (head + 1) * group].reshape(batch, 1, group, dim),
            call.key[:, :, segment],
            call.value[:, :, segment],
            attn_mask=None if visible is None else visible[..., segment],  # [B, 1, 1, S_g]: every row
            scale=call.scaling,
        )  # [B, 1, group, d], already [B, q, H', d]
        for head, segment in enumerate(layer.segments())
    ]
    return torch.cat(outputs, dim=2)


def _append_per_head(packed: torch.Tensor, new: torch.Tensor, head_slots: list[int]) -> torch.Tensor:
    """`[B, 1, S, d]` heads stored one after the other, each followed by its `[B, Hkv, q, d]` new rows."""
    pieces = []
    for head, segment in enumerate(packed.split(head_slots, dim=2)):
        pieces += [segment, new[:, head : head + 1]]
    return torch.cat(pieces, dim=2)
