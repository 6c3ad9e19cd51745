"""One evicting layer of [`RCKVCache`][rcattr.kvcache.cache.RCKVCache]: it stores per key head
([`HeadwiseLayer`][rcattr.kvcache.headwise.HeadwiseLayer]) and owns what it has decided
([`LayerState`][rcattr.kvcache.state.LayerState]). After each attention call that its policy says should evict,
it scores what it holds ([`RCLayer.scores_after`][rcattr.kvcache.layer.RCLayer.scores_after], by
[`rcattr.kvcache.eviction`][rcattr.kvcache.eviction]) and hands the plain scores to the cache, which takes the
decision once every layer the rule groups has reported; [`RCLayer.cut`][rcattr.kvcache.layer.RCLayer.cut] carries
it out on the layer's storage and records it in its state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from rcattr.kvcache.eviction import score_chunk, score_decoded, score_replayed
from rcattr.kvcache.headwise import HeadwiseLayer
from rcattr.kvcache.policy import EvictionPolicy, Rule
from rcattr.kvcache.scored import ChunkScores, DecodeScores, Scored
from rcattr.kvcache.state import DecodeRecord, Eviction
from rcattr.runtime.attention import AttentionCall, AttentionOutput
from rcattr.runtime.memory import release_freed_memory

__all__ = ["LayerScores", "RCLayer"]


class LayerScores(NamedTuple):
    """What one layer scored after its attention, and the rule that decides on it."""

    rule: Rule
    scored: Scored


class RCLayer(HeadwiseLayer):
    """A full-attention cache layer that evicts, as `policy` says, what its key heads will not need.

    Parameters
    ----------
    policy : EvictionPolicy
        The rule, the scorer and the decode-time eviction.
    window : int
        The last queries that stand in for the generation.

    Attributes
    ----------
    state : LayerState
        Its decisions so far and what decode-time eviction reads next (`policy.new_state()` at the start).
    compressing : bool or None
        Whether a forward of more than one token after the prompt is compressed, inside
        [`RCKVCache.compressing`][rcattr.kvcache.cache.RCKVCache.compressing]; None outside it (then
        `policy.chunks` says, [`compresses_chunks`][rcattr.kvcache.layer.RCLayer.compresses_chunks]).
    replayed : int or None
        Set while the prefill reads a context of this many tokens, a prompt and the context again: the
        context is scored against its replay and the rest forgotten.
    """

    def __init__(self, policy: EvictionPolicy, window: int) -> None:
        super().__init__()
        self.policy, self.window = policy, window
        self.state = policy.new_state()
        self.compressing: bool | None = None
        self.replayed: int | None = None

    def placed(self, call: AttentionCall) -> AttentionCall:
        """`call` with its queries' positions: the layer knows where its tokens sit."""
        return call.starting_at(self.seen - call.query.shape[-2])

    def attention(self, call: AttentionCall, proceed: Callable[[], AttentionOutput]) -> AttentionOutput:
        """The attention of the [`placed`][rcattr.kvcache.layer.RCLayer.placed] `call`'s queries over what
        the layer holds (the model's own kernel until something is evicted)."""
        return (self.attend(call), None) if self.packed else proceed()

    def scores_after(self, call: AttentionCall) -> LayerScores | None:
        """The eviction step after the attention of the placed `call`: the scores of the prompt (and of a
        later chunk, a chat's next turn, where [`compresses_chunks`][rcattr.kvcache.layer.RCLayer.compresses_chunks]),
        or at decode time every `every` tokens, with the rule that decides on them; None when nothing is
        to be evicted. A replayed prefill forgets what follows the context here, before the decision."""
        policy, state = self.policy, self.state
        decode = policy.decode
        if decode is not None:
            decode.observe(state, call.query, self.seen, self.window)
        step = None
        if not state.prefilled and self.replayed is not None:
            step = LayerScores(policy.rule, score_replayed(self, call, self.replayed, policy.scorer))
            self.forget_after(self.replayed)
            release_freed_memory()
        elif not state.prefilled or (call.query.shape[-2] > 1 and self.compresses_chunks):
            step = LayerScores(policy.rule, score_chunk(self, call, self.window, policy.scorer))
            release_freed_memory()  # the scoring's blocks, before the next layer stores its keys and values
        elif decode is not None and call.query.shape[-2] == 1:
            state.decoded += 1
            if state.decoded >= decode.every:
                rule = policy.decode_rule
                step = LayerScores(rule, score_decoded(self, state, call, decode, rule, policy.scorer))
        self.hidden = None
        return step

    def forget_after(self, tokens: int) -> None:
        """Hold the first `tokens` tokens alone (a replayed prefill keeps its context)."""
        self.keep_slots([positions < tokens for _, _, positions in self.held()])
        self.seen = tokens

    def cut(self, scored: Scored, keep: torch.Tensor, threshold: torch.Tensor | None) -> None:
        """Keep the `[B, S]` `keep` entries of what was `scored` and record the decision (`[B, Hkv]`
        thresholds, None for ratios and budgets) in the layer's state: a chunk's keys before its window
        (the window and earlier chunks' entries stay), or at decode time everything it holds."""
        state = self.state
        if isinstance(scored, DecodeScores):
            self.keep_slots(list(keep.split(scored.slots, dim=-1)))
            seen, batch = self.seen, keep.shape[0]
            held = torch.zeros(
                batch, self.kv_heads, seen + 1, dtype=torch.bool, device=keep.device
            )  # +1: pads
            for head, (_, _, positions) in enumerate(self.held()):
                held[:, head].scatter_(1, positions.long().masked_fill(positions < 0, seen), True)
            state.decode_evictions.append(DecodeRecord(seen, held[..., :seen], threshold))
            state.decoded, state.judged_until = 0, seen - state.recent.shape[-2]
            return
        if not isinstance(scored, ChunkScores):
            raise TypeError(
                f"a layer cuts a chunk's or a decode-time eviction's scores, not {type(scored).__name__}"
            )
        present, window = scored.present, scored.window
        batch, kv_heads = present.shape[0], len(scored.slots)
        before = scored.scores.view(batch, kv_heads, -1)
        in_window = present[:, None, present.shape[-1] - window :].expand(batch, kv_heads, window)
        kept = torch.cat([keep.view_as(before), in_window], dim=-1)
        window_scores = before.new_full((batch, kv_heads, window), float("inf"))
        scores = torch.cat([before, window_scores.masked_fill(~in_window, float("nan"))], dim=-1)
        state.evictions.append(Eviction(scores, threshold, kept, present, scored.start))
        state.judged_until = self.seen - window
        if not bool(kept.all()):
            n = kept.shape[-1]
            self.keep_slots(
                [
                    torch.cat([positions[:, :-n] >= 0, kept[:, head]], dim=-1)
                    for head, (_, _, positions) in enumerate(self.held())
                ]
            )

    @property
    def compresses_chunks(self) -> bool:
        """Whether a forward of more than one token after the prompt is compressed."""
        return self.policy.chunks == "every" if self.compressing is None else self.compressing

    def select_rows(self, select: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply a batch re-indexing (beam search, batch expansion) to what it stores and to its state."""
        super().select_rows(select)
        self.state.select(select)

    def reset(self) -> None:
        """Forget everything: the entries and the decisions."""
        super().reset()
        self.state = self.policy.new_state()
