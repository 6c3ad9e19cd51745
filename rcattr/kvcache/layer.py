"""One evicting layer of [`RCKVCache`][rcattr.kvcache.cache.RCKVCache]: it stores per key head ([`HeadwiseLayer`][rcattr.kvcache.headwise.HeadwiseLayer]),
owns what it has decided ([`LayerState`][rcattr.kvcache.state.LayerState]), and after each attention call that its
policy says should evict, scores what it holds ([`rcattr.kvcache.eviction`][rcattr.kvcache.eviction]), and [`RCLayer.evict`][rcattr.kvcache.layer.RCLayer.evict]
reads the decision in one place: the cache's [`Barrier`][rcattr.kvcache.barrier.Barrier] gathers the scores (every
evicting layer's, for a `"model"`-scope rule), the rule decides ([`Rule.decide`][rcattr.kvcache.policy.Rule.decide])
and each layer's scores apply it ([`rcattr.kvcache.scored`][rcattr.kvcache.scored]).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rcattr.kvcache.barrier import Barrier
from rcattr.kvcache.eviction import score_chunk, score_decoded, score_replayed
from rcattr.kvcache.headwise import HeadwiseLayer
from rcattr.kvcache.policy import EvictionPolicy, Rule
from rcattr.kvcache.scored import Scored
from rcattr.runtime.attention import AttentionCall, AttentionOutput
from rcattr.runtime.memory import release_freed_memory

__all__ = ["RCLayer"]


class RCLayer(HeadwiseLayer):
    """A full-attention cache layer that evicts, as `policy` says, what its key heads will not need.

    Parameters
    ----------
    policy : EvictionPolicy
        The rule, the scorer and the decode-time eviction.
    window : int
        The last queries that stand in for the generation.
    barrier : Barrier
        Where its scores wait for a decision (shared by the cache's evicting layers).

    Attributes
    ----------
    state : LayerState
        Its decisions so far and what decode-time eviction reads next (`policy.new_state()` at the start).
    compress_chunks : bool or None
        Whether a forward of more than one token after the prompt is compressed; None: as `policy.chunks`
        says (set by [`RCKVCache.compressing`][rcattr.kvcache.RCKVCache.compressing]).
    replayed : int or None
        Set while the prefill reads a context of this many tokens, a prompt and the context again: the
        context is scored against its replay and the rest forgotten ([`score_replayed`][rcattr.kvcache.eviction.score_replayed]).
    """

    def __init__(self, policy: EvictionPolicy, window: int, barrier: Barrier[tuple[RCLayer, Scored]]) -> None:
        super().__init__()
        self.policy, self.window, self.barrier = policy, window, barrier
        self.state = policy.new_state()
        self.compress_chunks: bool | None = None
        self.replayed: int | None = None

    def attention(self, call: AttentionCall, proceed: Callable[[], AttentionOutput]) -> AttentionOutput:
        """The attention of `call`'s queries over what the layer holds (the model's own kernel until
        something is evicted), then the layer's eviction: of the prompt (and of a later chunk, a chat's next
        turn, where `compress_chunks` or the policy says so), or at decode time every `every` tokens."""
        call = call.starting_at(self.seen - call.query.shape[-2])  # the layer knows where its tokens sit
        output = (self.attend(call), None) if self.packed else proceed()
        policy, state = self.policy, self.state
        decode = policy.decode
        if decode is not None:
            decode.observe(state, call.query, self.seen, self.window)
        if not state.prefilled and self.replayed is not None:
            self.evict(policy.rule, score_replayed(self, call, self.replayed, policy.scorer))
            release_freed_memory()
        elif not state.prefilled or (call.query.shape[-2] > 1 and self.compresses_chunks):
            self.evict(policy.rule, score_chunk(self, call, self.window, policy.scorer))
            release_freed_memory()  # the scoring's blocks, before the next layer stores its keys and values
        elif decode is not None and call.query.shape[-2] == 1:
            state.decoded += 1
            if state.decoded >= decode.every:
                rule = policy.decode_rule
                self.evict(rule, score_decoded(self, state, call, decode, rule, policy.scorer))
        self.hidden = None
        return output

    def evict(self, rule: Rule, scored: Scored) -> None:
        """Evict by `rule` from what was `scored`: once the barrier has every layer the rule groups, the
        rule decides for them and each layer keeps what it was told."""
        ready = self.barrier.gather((self, scored), rule.spans_layers)
        if not ready:
            return
        decisions = rule.decide([layer_scores for _, layer_scores in ready])
        for (layer, layer_scores), (keep, threshold) in zip(ready, decisions, strict=True):
            layer_scores.apply(layer, layer.state, keep, threshold)
            release_freed_memory()  # what the layer no longer holds, before the next one is re-packed

    @property
    def compresses_chunks(self) -> bool:
        """Whether a forward of more than one token after the prompt is compressed."""
        return self.policy.chunks == "every" if self.compress_chunks is None else self.compress_chunks

    def select_rows(self, select: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply a batch re-indexing (beam search, batch expansion) to what it stores and to its state."""
        super().select_rows(select)
        self.state.select(select)

    def reset(self) -> None:
        """Forget everything: the entries, the decisions, and any scores waiting at the barrier."""
        super().reset()
        self.state = self.policy.new_state()
        self.barrier.clear()
