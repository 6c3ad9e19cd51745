"""One full-attention layer of :class:`~rcattr.kvcache.RCKVCache`: a ``DynamicLayer`` whose key heads
keep different prompt tokens.

Until something is evicted, storage is transformers' ``[batch, kv_heads, seq, head_dim]``. After
eviction the key heads keep different numbers of tokens, so they are stored one after the other in
``[batch, 1, slots, head_dim]`` (AdaKV's flattened layout): head g owns the segment
``head_slots[g]`` long, its tokens in their original order. Nothing is padded between heads; only
batch rows that keep fewer tokens than the longest row of the same head are padded.
``positions`` ``[batch, 1 or kv_heads, slots]`` records the sequence position of every slot (-1 for
a pad). Keys keep the RoPE of their original positions, and the cache reports the uncompressed
sequence length, so new tokens get the positions they would have had.

Every forward of more than one token (the prompt, and each later turn of a chat fed to the same
cache) is a chunk: its tokens are scored against the chunk's own last ``window`` queries and evicted
after its attention has run. Entries kept from earlier chunks stay; single tokens (decoding) are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

import torch
from transformers.cache_utils import DynamicLayer

from rcattr._compat import mask_query_length
from rcattr.attention import AttentionCall
from rcattr.capture import raw_logits
from rcattr.kvcache.scoring import (
    GroupReduce,
    Statistic,
    adaptive_keep,
    budget_keep,
    fixed_ratio_keep,
    leading_tokens,
    value_weighted,
    window_rc_scores,
)

__all__ = [
    "DecodeEviction",
    "DecodeScores",
    "Eviction",
    "EvictionPolicy",
    "LayerBudget",
    "RCLayer",
    "WindowScores",
]

LayerBudget = Literal["layer", "model"]


@dataclass(frozen=True)
class EvictionPolicy:
    """How every layer of one cache scores and decides (see :class:`~rcattr.kvcache.RCKVCache`)."""

    c: float = 1.0
    window: int = 16
    ratio: float | None = None
    group_reduce: GroupReduce = "mean"
    statistic: Statistic = "expected"
    value_norm: bool = True
    sinks: int = 4
    layer_budget: LayerBudget = "model"
    score_dtype: torch.dtype = torch.float32
    decode_every: int | None = None
    budget: int | None = None
    question_window: bool = False

    def scores(self, logits: torch.Tensor, visible: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """``[B, Hkv, m]`` the score of every key before the window, from the window's ``[B, H, w, m + w]``
        logits on them and on itself, their ``[B, w, m + w]`` visibility and the ``[B, Hkv, >= m, d]`` values."""
        scores = window_rc_scores(
            logits,
            visible,
            values.shape[1],
            group_reduce=self.group_reduce,
            statistic=self.statistic,
            dtype=self.score_dtype,
        )
        return value_weighted(scores, values) if self.value_norm else scores

    def keep(
        self, scores: torch.Tensor, protected: torch.Tensor, window_entries: int, heads: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The keep decision for ``[B, G, m]`` scores of G groups that each get one threshold or budget.

        A group is one key head's keys before the window (``layer_budget="layer"``), or every key head
        of every layer flattened into one (``"model"``); ``window_entries`` is the number of window
        entries a group holds besides its ``m`` keys, and ``heads`` the key heads it spans.
        ``protected [B, G, m]`` keys (the sinks) are kept whatever their score, and count towards a fixed
        ratio's budget and a token ``budget``. Returns the ``[B, G, m]`` decision and the thresholds
        ``[B, G]`` (None in ``ratio`` and ``budget`` modes).
        """
        if self.budget is not None:  # the best budget entries per head of the group, window included
            return budget_keep(scores, protected, self.budget * heads - window_entries), None
        if self.ratio is not None:
            ranked = scores.masked_fill(protected, float("inf"))
            return fixed_ratio_keep(ranked, self.ratio, window_entries), None
        keep, threshold = adaptive_keep(scores, self.c)
        return keep | protected, threshold


@dataclass(frozen=True)
class WindowScores:
    """What one layer scored in a chunk (the prefill, or a later multi-token forward), before anything is decided.

    Attributes
    ----------
    before : torch.Tensor
        ``[B, Hkv, m]`` score of every key of the chunk before its window (``m = n - window``); ``nan``
        for padding.
    protected : torch.Tensor
        ``[B, Hkv, m]`` bool, the keys kept whatever their score (the first ``sinks`` real tokens of the
        sequence, in its first chunk).
    present : torch.Tensor
        ``[B, n]`` bool, the chunk's tokens that are not padding.
    window : int
        Window length (at most the chunk's).
    start : int
        Sequence position of the chunk's first token (0 for the prefill).
    """

    before: torch.Tensor
    protected: torch.Tensor
    present: torch.Tensor
    window: int
    start: int = 0


@dataclass(frozen=True)
class Eviction:
    """What one layer decided for one chunk (the prefill, or a later turn), kept for analysis.

    Attributes
    ----------
    scores : torch.Tensor
        ``[B, Hkv, n]`` RC score of every token of the chunk; ``inf`` for the window, ``nan`` for padding.
    threshold : torch.Tensor or None
        ``[B, Hkv]`` the adaptive threshold ``c · mean score`` (None in ``ratio`` mode).
    kept : torch.Tensor
        ``[B, Hkv, n]`` bool, the chunk's tokens each key head keeps.
    present : torch.Tensor
        ``[B, n]`` bool, the chunk's tokens that are not padding.
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
        """``[B, Hkv]`` share of each head's (non-padding) prompt tokens that were evicted."""
        prompt = self.present.sum(-1, keepdim=True).clamp_min(1)
        return 1.0 - self.kept.sum(-1) / prompt

    @property
    def prompt_entries(self) -> int:
        """Non-padding prompt entries over all rows and key heads (before eviction)."""
        return int(self.present.sum()) * self.kept.shape[1]


@dataclass(frozen=True)
class DecodeScores:
    """What one layer scored at a decode-time eviction, before anything is decided.

    Attributes
    ----------
    scores : torch.Tensor
        ``[B, slots]`` score of every held slot, the key heads one after the other; ``nan`` for the slots
        not judged (windows, sinks, pads and, without a budget, what an earlier eviction judged).
    protected : torch.Tensor
        ``[B, slots]`` bool, the slots kept whatever their score.
    slots : list of int
        Slots of each key head.
    """

    scores: torch.Tensor
    protected: torch.Tensor
    slots: list[int]


@dataclass(frozen=True)
class DecodeEviction:
    """What one layer held after a decode-time eviction, kept for analysis and tests.

    Attributes
    ----------
    seen : int
        Tokens seen when it ran (it ran after the attention of token ``seen - 1``).
    held : torch.Tensor
        ``[B, Hkv, seen]`` bool, the positions each key head holds afterwards.
    threshold : torch.Tensor or None
        ``[B]`` the layer's adaptive threshold ``c · mean score`` (None with a budget).
    """

    seen: int
    held: torch.Tensor
    threshold: torch.Tensor | None


class RCLayer(DynamicLayer):
    """A dynamic cache layer that evicts prompt tokens head by head after each multi-token forward.

    Parameters
    ----------
    layer_idx : int
        The decoder layer this cache layer serves.
    policy : EvictionPolicy
        Window, score, threshold or ratio, and how key heads aggregate their query heads.
    decide_jointly : callable, optional
        With budgets shared across layers, called with this layer and its :class:`WindowScores` instead of
        deciding alone; whoever decides then calls :meth:`apply`.
    decide_decoded_jointly : callable, optional
        The same for a decode-time eviction to a budget (:class:`DecodeScores`, then :meth:`apply_decoded`).
    """

    is_croppable = False  # evicted tokens cannot come back

    def __init__(
        self,
        layer_idx: int,
        policy: EvictionPolicy,
        decide_jointly: Callable[[RCLayer, WindowScores], None] | None = None,
        decide_decoded_jointly: Callable[[RCLayer, DecodeScores], None] | None = None,
    ) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.policy = policy
        self.decide_jointly = decide_jointly
        self.decide_decoded_jointly = decide_decoded_jointly
        self.positions: torch.Tensor | None = None
        self.head_slots: list[int] | None = None  # set once heads hold different tokens
        self.has_pads = False
        self.kv_heads = 0
        self.seen = 0
        self.evictions: list[Eviction] = []  # one per chunk, the prefill's first
        self.recent_queries: torch.Tensor | None = None  # [B, H, <= window, d], the decode-time window
        self.question_queries: torch.Tensor | None = None  # [B, H, <= window, d], the last chunk's window
        self.question_start = 0  # the sequence position of its first query
        self.judged_until = 0  # entries before this position were judged by an eviction
        self.decoded = 0  # tokens decoded since the last eviction
        self.decode_evictions: list[DecodeEviction] = []

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
            assert self.positions is not None
            self.positions = torch.cat([self.positions, added], dim=-1)
            return keys, values
        assert self.keys is not None and self.values is not None and self.positions is not None
        self.keys = _append_per_head(self.keys, key_states, self.head_slots)
        self.values = _append_per_head(self.values, value_states, self.head_slots)
        positions = _append_per_head(self.positions[..., None], added[..., None], self.head_slots)
        self.positions = positions[..., 0]
        self.head_slots = [slots + new for slots in self.head_slots]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        """Tokens seen so far, evicted ones included: new tokens continue at this position."""
        return self.seen

    def get_mask_sizes(self, query: int | torch.Tensor) -> tuple[int, int]:  # type: ignore[override]
        """The model builds its mask over every position seen; :meth:`attend` picks the stored ones."""
        return self.seen + mask_query_length(query), 0

    @property
    def eviction(self) -> Eviction | None:
        """The prefill's decision (None before the prefill); later chunks' are in :attr:`evictions`."""
        return self.evictions[0] if self.evictions else None

    @property
    def prefilled(self) -> bool:
        """Whether the prefill forward has filled this layer (and eviction therefore has run)."""
        return bool(self.evictions)

    def evicted_share(self) -> torch.Tensor:
        """``[B, Hkv]`` share of each key head's (non-padding) chunk tokens evicted, over every chunk."""
        kept = sum(e.kept.sum(-1) for e in self.evictions)
        prompt = sum(e.present.sum(-1, keepdim=True) for e in self.evictions)
        return 1.0 - kept / prompt.clamp_min(1)  # type: ignore[union-attr]

    def entries(self) -> tuple[int, int]:
        """(kept, all) non-padding chunk entries over every chunk, row and key head."""
        kept = sum(int(e.kept.sum()) for e in self.evictions)
        return kept, sum(e.prompt_entries for e in self.evictions)

    @property
    def packed(self) -> bool:
        """Whether the heads are stored one after the other (something was evicted)."""
        return self.head_slots is not None

    def segments(self) -> list[slice]:
        """The slots of each key head in the packed layout."""
        assert self.head_slots is not None
        ends = accumulate(self.head_slots)
        return [slice(end - slots, end) for slots, end in zip(self.head_slots, ends, strict=True)]

    def kept_indices(self) -> list[torch.Tensor]:
        """Per key head, ``[B, slots]`` the sequence position held in each of its slots (-1: pad)."""
        assert self.positions is not None
        if self.head_slots is None:
            return list(self.positions.long().unbind(1))
        return [self.positions[:, 0, segment].long() for segment in self.segments()]

    def evict(self, call: AttentionCall) -> None:
        """Score the chunk just stored against its last ``window`` queries and drop what each head does
        not keep; entries of earlier chunks stay. ``call`` is the chunk's attention call (its queries
        ``[B, H, n, d]`` after RoPE and q-norm, and the model's mask)."""
        scored = self.score(call)
        if self.decide_jointly is not None:
            self.decide_jointly(self, scored)
            return
        if self.policy.budget is not None:  # a budget per layer, shared by its key heads by score
            before, protected = scored.before, scored.protected
            batch, heads = before.shape[:2]
            keep, threshold = self.policy.keep(
                before.reshape(batch, 1, -1), protected.reshape(batch, 1, -1), scored.window * heads, heads
            )
            keep = keep.view_as(before)
        else:
            keep, threshold = self.policy.keep(scored.before, scored.protected, scored.window)
        self.apply(scored, keep, threshold)

    def observe(self, query: torch.Tensor) -> None:
        """Keep the last ``window`` queries ``[B, H, q, d]`` this layer has read: the window that decode-time
        eviction scores against."""
        window = self.policy.window
        recent = query if self.recent_queries is None else torch.cat([self.recent_queries, query], dim=2)
        self.recent_queries = recent[:, :, -window:]
        if query.shape[-2] > 1:  # a chunk: the prompt, the question, a chat's next turn
            self.question_queries = query[:, :, -window:]
            self.question_start = self.seen - self.question_queries.shape[-2]

    def evict_decoded(self, call: AttentionCall) -> None:
        """Decode-time eviction: score every held entry of every key head against the last ``window``
        queries (and, with ``question_window``, the last chunk's window too), with the prefill's statistic,
        and keep the best ``budget`` per key head on average (with ``layer_budget="model"``, decided for
        every layer at once by ``decide_decoded_jointly``); without a budget, score the entries no eviction
        has judged yet (the tokens generated since the last) and keep those above ``c`` times their mean
        score (the key heads of the layer share the threshold). The windows and the sinks stay.
        ``call`` is the current decoding step's attention call."""
        scored, policy = self.score_decoded(call), self.policy
        if policy.budget is not None and self.decide_decoded_jointly is not None:
            self.decide_decoded_jointly(self, scored)
            return
        if policy.budget is not None:
            keep, threshold = (
                budget_keep(scored.scores, scored.protected, policy.budget * self.kv_heads),
                None,
            )
        else:
            keep, layer_threshold = adaptive_keep(scored.scores[:, None], policy.c)
            keep, threshold = keep[:, 0] | scored.protected, layer_threshold[:, 0]
        self.apply_decoded(scored, keep, threshold)

    def score_decoded(self, call: AttentionCall) -> DecodeScores:
        """The scores of a decode-time eviction (see :meth:`evict_decoded`), nothing decided yet."""
        assert self.recent_queries is not None and self.positions is not None
        policy, seen = self.policy, self.seen
        query, window_positions = self._decode_window()
        batch, window, device = query.shape[0], query.shape[-2], query.device
        everything = torch.arange(seen, device=device)
        last_row = torch.tensor([call.query.shape[-2] - 1], device=device)
        real = call.visible(last_row, everything)[:, 0].expand(batch, seen)  # not padding
        sinks = leading_tokens(real, policy.sinks)
        in_window = torch.zeros(seen, dtype=torch.bool, device=device)
        in_window[window_positions] = True
        # without a budget, what an eviction kept stays (re-judging it against each new mean would shrink
        # the cache at every eviction); a budget re-ranks everything held
        judged = everything < (self.judged_until if policy.budget is None else 0)
        causal = torch.ones(window, window, dtype=torch.bool, device=device).tril()
        group = query.shape[1] // self.kv_heads
        scores, protected = [], []
        for head, (keys, values, positions) in enumerate(self._held()):
            slot = positions.clamp_min(0).long()  # [B, S]
            candidate = (positions >= 0) & real.gather(1, slot) & ~in_window[slot] & ~judged[slot]
            window_slots = (positions[..., None] == window_positions).int().argmax(1)  # [B, w]
            window_keys = keys.gather(1, window_slots[..., None].expand(-1, -1, keys.shape[-1]))
            logits = raw_logits(
                query[:, head * group : (head + 1) * group],
                torch.cat([keys, window_keys], dim=1)[:, None],
                dtype=policy.score_dtype,
            )  # [B, group, w, S + w]
            before_row = positions[:, None, :] < window_positions[None, :, None]  # causal, [B, w, S]
            visible = torch.cat([candidate[:, None] & before_row, causal.expand(batch, -1, -1)], dim=-1)
            scores.append(policy.scores(logits, visible, values[:, None])[:, 0])
            protected.append((positions >= 0) & (in_window[slot] | judged[slot] | sinks.gather(1, slot)))
        return DecodeScores(
            torch.cat(scores, dim=-1), torch.cat(protected, dim=-1), [s.shape[-1] for s in scores]
        )

    def apply_decoded(self, scored: DecodeScores, keep: torch.Tensor, threshold: torch.Tensor | None) -> None:
        """Keep the ``[B, slots]`` ``keep`` slots of the decode-time eviction ``scored`` and record it."""
        assert self.recent_queries is not None
        self._keep_slots(list(keep.split(scored.slots, dim=-1)))
        seen, batch, device = self.seen, keep.shape[0], keep.device
        held = torch.zeros(batch, self.kv_heads, seen + 1, dtype=torch.bool, device=device)  # +1: pad slots
        for head, (_, _, positions) in enumerate(self._held()):
            held[:, head].scatter_(1, positions.long().masked_fill(positions < 0, seen), True)
        self.decode_evictions.append(DecodeEviction(seen, held[..., :seen], threshold))
        self.decoded, self.judged_until = 0, seen - self.recent_queries.shape[-2]

    def _decode_window(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The queries ``[B, H, w, d]`` decode-time eviction scores against and their ``[w]`` positions, in
        order: the last chunk's window (with ``question_window``, where it is not recent), then the recent."""
        assert self.recent_queries is not None
        recent = self.recent_queries
        device, start = recent.device, self.seen - recent.shape[-2]
        positions = torch.arange(start, self.seen, device=device)
        if not self.policy.question_window or self.question_queries is None:
            return recent, positions
        older = self.question_queries[:, :, : max(0, start - self.question_start)]
        question = torch.arange(self.question_start, self.question_start + older.shape[-2], device=device)
        return torch.cat([older, recent], dim=2), torch.cat([question, positions])

    def _held(self) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per key head, its ``[B, S, d]`` keys and values and ``[B, S]`` positions (-1: pad slot)."""
        assert self.keys is not None and self.values is not None and self.positions is not None
        if self.head_slots is None:
            return [(self.keys[:, h], self.values[:, h], self.positions[:, h]) for h in range(self.kv_heads)]
        return [
            (self.keys[:, 0, seg], self.values[:, 0, seg], self.positions[:, 0, seg])
            for seg in self.segments()
        ]

    def score(self, call: AttentionCall) -> WindowScores:
        """The policy's score of every key of the chunk before its window (see :meth:`evict`)."""
        query = call.query
        keys, values = self._chunk(query.shape[-2])
        batch, kv_heads, n = keys.shape[:3]
        start = self.seen - n
        window = min(self.policy.window, n)
        device = query.device
        rows = torch.arange(n - window, n, device=device)
        visible = call.visible(rows, torch.arange(start, self.seen, device=device)).expand(batch, window, n)
        present = visible[:, -1]  # the last token attends to every real one
        if not bool(present[:, -1].all()):
            raise ValueError(
                "RCKVCache needs left padding: the last prompt token of some batch row is padding "
                "(set tokenizer.padding_side = 'left')"
            )
        policy = self.policy
        if n > window:
            logits = raw_logits(query[:, :, -window:], keys, dtype=policy.score_dtype)
            before = policy.scores(logits, visible, values)
        else:  # the whole chunk is window
            before = keys.new_empty(batch, kv_heads, 0, dtype=policy.score_dtype)
        sinks = policy.sinks if start == 0 else 0  # the sequence's first tokens, not every chunk's
        protected = leading_tokens(present, sinks)[:, None, : n - window].expand_as(before)
        return WindowScores(before, protected, present, window, start)

    def _chunk(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B, Hkv, n, d]`` keys and values of the last ``n`` tokens stored (the chunk just fed)."""
        assert self.keys is not None and self.values is not None
        if self.head_slots is None:
            return self.keys[:, :, -n:], self.values[:, :, -n:]
        segments = self.segments()
        return tuple(  # type: ignore[return-value]
            torch.stack([stored[:, 0, segment][:, -n:] for segment in segments], dim=1)
            for stored in (self.keys, self.values)
        )

    def apply(self, scored: WindowScores, keep_before: torch.Tensor, threshold: torch.Tensor | None) -> None:
        """Record the decision ``keep_before [B, Hkv, m]`` on the chunk's keys before its window and evict
        the rest of the chunk."""
        before, present, window = scored.before, scored.present, scored.window
        batch, kv_heads = before.shape[:2]
        in_window = present[:, None, -window:].expand(batch, kv_heads, window)
        kept = torch.cat([keep_before, in_window], dim=-1)
        window_scores = before.new_full((batch, kv_heads, window), float("inf"))
        scores = torch.cat([before, window_scores.masked_fill(~in_window, float("nan"))], dim=-1)
        eviction = Eviction(
            scores=scores, threshold=threshold, kept=kept, present=present, start=scored.start
        )
        self.evictions.append(eviction)
        self.judged_until = self.seen - window
        if not bool(kept.all()):
            self._retain(kept)

    def _retain(self, kept: torch.Tensor) -> None:
        """Keep, of the last chunk's tokens, the ``[B, Hkv, n]`` ``kept`` ones (earlier slots stay)."""
        n = kept.shape[-1]
        self._keep_slots(
            [
                torch.cat([positions[:, :-n] >= 0, kept[:, head]], dim=-1)
                for head, (_, _, positions) in enumerate(self._held())
            ]
        )

    def _keep_slots(self, keeps: list[torch.Tensor]) -> None:
        """Keep the ``[B, S]`` ``keeps[g]`` slots of every key head g and store the heads one after the
        other; a row that keeps fewer slots than its head's longest row is padded."""
        keys, values, positions, head_slots = [], [], [], []
        for (head_keys, head_values, head_positions), keep in zip(self._held(), keeps, strict=True):
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
        """``[B, q, H, d]`` the attention of ``call``'s queries over the packed slots, one kernel call per key
        head on its query heads and its own slots, each slot visible where the model's mask allows at its
        position (pads and evicted tokens never)."""
        assert self.positions is not None
        query, q_len = call.query, call.query.shape[-2]
        positions = self.positions.long()  # [B, 1, S]
        batch, _, slots = positions.shape
        visible: torch.Tensor | None = None
        if call.attention_mask is not None or q_len > 1 or self.has_pads:
            rows = torch.arange(q_len, device=query.device)
            every = call.visible(rows, torch.arange(self.seen, device=query.device))  # [B or 1, q, seen]
            index = positions.clamp_min(0).expand(batch, q_len, slots)
            visible = every.expand(batch, q_len, self.seen).gather(-1, index)[:, None]
            visible = visible & (positions >= 0)[:, :, None, :]  # [B, 1, q, S]
        group = query.shape[1] // self.kv_heads
        outputs = [
            call.attend(
                query[:, head * group : (head + 1) * group],
                call.key[:, :, segment],
                call.value[:, :, segment],
                None if visible is None else visible[..., segment],
            )
            for head, segment in enumerate(self.segments())
        ]
        return torch.cat(outputs, dim=2)

    def nbytes(self) -> int:
        """Bytes this layer holds: keys, values and slot positions."""
        tensors = (self.keys, self.values, self.positions)
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    def padding_nbytes(self) -> int:
        """Bytes of keys and values in pad slots (batch rows shorter than their head's longest row)."""
        if self.positions is None:
            return 0
        return int((self.positions < 0).sum()) * self._slot_nbytes()

    def full_nbytes(self) -> int:
        """Bytes a plain ``DynamicLayer`` would hold for the same tokens."""
        if self.positions is None:
            return 0
        return self.positions.shape[0] * self.kv_heads * self.seen * self._slot_nbytes()

    def _slot_nbytes(self) -> int:
        assert self.keys is not None and self.values is not None
        return (
            self.keys.shape[-1] * self.keys.element_size()
            + self.values.shape[-1] * self.values.element_size()
        )

    def _select(self, select: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply a batch re-indexing (beam search, batch expansion) to keys, values and positions."""
        for name in ("keys", "values", "positions", "recent_queries", "question_queries"):
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
        self.keys = self.values = self.positions = self.recent_queries = self.question_queries = None
        self.decoded, self.decode_evictions, self.question_start, self.judged_until = 0, [], 0, 0
        self.head_slots, self.has_pads, self.is_initialized, self.seen, self.evictions = (
            None,
            False,
            False,
            0,
            [],
        )


def _append_per_head(packed: torch.Tensor, new: torch.Tensor, head_slots: list[int]) -> torch.Tensor:
    """``[B, 1, S, d]`` heads stored one after the other, each followed by its ``[B, Hkv, q, d]`` new rows."""
    pieces = []
    for head, segment in enumerate(packed.split(head_slots, dim=2)):
        pieces += [segment, new[:, head : head + 1]]
    return torch.cat(pieces, dim=2)
