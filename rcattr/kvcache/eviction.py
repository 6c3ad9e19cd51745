"""Scoring what one :class:`~rcattr.kvcache.layer.RCLayer` holds, deciding with a rule at its scope, and
applying the decision: the steps :class:`~rcattr.kvcache.RCKVCache` runs after a layer's attention.

Every forward of more than one token (the prompt, and each later turn of a chat fed to the same cache) is a
chunk: its tokens are scored against the chunk's own last ``window`` queries and evicted after its attention
has run; entries kept from earlier chunks stay. With decode-time eviction, every ``every`` decoded tokens
all that a layer holds is scored against its last window of queries (:func:`score_decoded`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rcattr.attention import AttentionCall
from rcattr.capture import raw_logits
from rcattr.kvcache.layer import RCLayer
from rcattr.kvcache.policy import DecodeEviction, Rule
from rcattr.kvcache.scoring import WindowScorer, leading_tokens
from rcattr.kvcache.state import DecodeRecord, Eviction, LayerState

__all__ = ["ChunkScores", "Scored", "apply_chunk", "apply_decoded", "decide", "score_chunk", "score_decoded"]


@dataclass(frozen=True)
class Scored:
    """What one layer scored, nothing decided yet.

    Attributes
    ----------
    scores : torch.Tensor
        ``[B, S]`` score of every candidate, the key heads one after the other; ``nan`` for what is not a
        candidate (padding, and at decode time the windows, sinks, pads and what is not judged again).
    protected : torch.Tensor
        ``[B, S]`` bool, the entries kept whatever their score.
    slots : list of int
        Entries of each key head in ``scores``.
    window : int
        Entries each key head holds besides its ``slots`` that count in a ratio or a budget (the chunk's
        window; 0 at decode time, where the windows are among the protected slots).
    """

    scores: torch.Tensor
    protected: torch.Tensor
    slots: list[int]
    window: int


@dataclass(frozen=True)
class ChunkScores(Scored):
    """A chunk's scores (the keys before its window); ``present [B, n]`` marks its real tokens and
    ``start`` is the sequence position of its first."""

    present: torch.Tensor
    start: int


def decide(rule: Rule, scored: Sequence[Scored]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Per layer of ``scored`` (every evicting layer at ``"model"`` scope, one otherwise), the ``[B, S]``
    decision and the ``[B, Hkv]`` threshold that applied to each key head (None for ratios and budgets)."""
    batch = scored[0].scores.shape[0]

    def thresholds(threshold: torch.Tensor | None, heads: int) -> torch.Tensor | None:
        return None if threshold is None else threshold.expand(batch, heads)

    if rule.scope == "model":
        per_layer = [len(s.slots) for s in scored]
        keep, threshold = rule.keep(
            torch.cat([s.scores[:, None] for s in scored], dim=-1),
            torch.cat([s.protected[:, None] for s in scored], dim=-1),
            sum(s.window * h for s, h in zip(scored, per_layer, strict=True)),
            sum(per_layer),
        )
        parts = keep[:, 0].split([s.scores.shape[-1] for s in scored], dim=-1)
        return [(part, thresholds(threshold, h)) for part, h in zip(parts, per_layer, strict=True)]
    (layer,) = scored
    heads = len(layer.slots)
    if rule.scope == "layer":
        keep, threshold = rule.keep(
            layer.scores[:, None], layer.protected[:, None], layer.window * heads, heads
        )
        return [(keep[:, 0], thresholds(threshold, heads))]
    if len(set(layer.slots)) == 1:  # every key head as many candidates: decided at once
        shape = (batch, heads, layer.slots[0])
        keep, threshold = rule.keep(layer.scores.view(shape), layer.protected.view(shape), layer.window, 1)
        return [(keep.reshape(batch, -1), threshold)]
    decided = [
        rule.keep(scores[:, None], protected[:, None], layer.window, 1)
        for scores, protected in zip(
            layer.scores.split(layer.slots, -1), layer.protected.split(layer.slots, -1), strict=True
        )
    ]
    kept = torch.cat([keep[:, 0] for keep, _ in decided], dim=-1)
    per_head = [threshold for _, threshold in decided if threshold is not None]
    return [(kept, torch.cat(per_head, dim=1) if per_head else None)]


def score_chunk(layer: RCLayer, call: AttentionCall, window: int, scorer: WindowScorer) -> ChunkScores:
    """Score every key of the chunk just stored that comes before its last ``window`` tokens, against the
    chunk's last ``window`` queries (``call`` is the chunk's attention call: its queries ``[B, H, n, d]``
    after RoPE and q-norm, and the model's mask)."""
    query = call.query
    keys, values = layer.chunk(query.shape[-2])
    batch, kv_heads, n = keys.shape[:3]
    start = layer.seen - n
    window = min(window, n)
    rows = torch.arange(n - window, n, device=query.device)
    visible = call.visible(rows, torch.arange(start, layer.seen, device=query.device)).expand(
        batch, window, n
    )
    present = visible[:, -1]  # the last token attends to every real one
    if not bool(present[:, -1].all()):
        raise ValueError(
            "RCKVCache needs left padding: the last prompt token of some batch row is padding "
            "(set tokenizer.padding_side = 'left')"
        )
    if n > window:
        before = scorer(raw_logits(query[:, :, -window:], keys, dtype=scorer.dtype), visible, values)
    else:  # the whole chunk is window
        before = keys.new_empty(batch, kv_heads, 0, dtype=scorer.dtype)
    sinks = scorer.sinks if start == 0 else 0  # the sequence's first tokens, not every chunk's
    protected = leading_tokens(present, sinks)[:, None, : n - window].expand_as(before)
    return ChunkScores(
        before.reshape(batch, -1),
        protected.reshape(batch, -1),
        [n - window] * kv_heads,
        window,
        present,
        start,
    )


def apply_chunk(
    layer: RCLayer, state: LayerState, scored: ChunkScores, keep: torch.Tensor, threshold: torch.Tensor | None
) -> None:
    """Record the ``[B, S]`` decision on the chunk's keys before its window and evict the rest of the chunk
    (earlier slots stay)."""
    present, window = scored.present, scored.window
    batch, kv_heads = present.shape[0], len(scored.slots)
    before = scored.scores.view(batch, kv_heads, -1)
    in_window = present[:, None, -window:].expand(batch, kv_heads, window)
    kept = torch.cat([keep.view_as(before), in_window], dim=-1)
    window_scores = before.new_full((batch, kv_heads, window), float("inf"))
    scores = torch.cat([before, window_scores.masked_fill(~in_window, float("nan"))], dim=-1)
    state.evictions.append(Eviction(scores, threshold, kept, present, scored.start))
    state.judged_until = layer.seen - window
    if not bool(kept.all()):
        n = kept.shape[-1]
        layer.keep_slots(
            [
                torch.cat([positions[:, :-n] >= 0, kept[:, head]], dim=-1)
                for head, (_, _, positions) in enumerate(layer.held())
            ]
        )


def score_decoded(
    layer: RCLayer,
    state: LayerState,
    call: AttentionCall,
    decode: DecodeEviction,
    rule: Rule,
    scorer: WindowScorer,
) -> Scored:
    """Score the entries ``layer`` holds against the queries ``decode`` names (the last window), with the
    prefill's statistic: every entry if ``rule`` ranks everything again, else those no eviction has judged.
    The windows and the sinks are protected. ``call`` is the current decoding step's attention call."""
    seen = layer.seen
    query, window_positions = decode.window(state, seen)
    batch, window, device = query.shape[0], query.shape[-2], query.device
    everything = torch.arange(seen, device=device)
    last_row = torch.tensor([call.query.shape[-2] - 1], device=device)
    real = call.visible(last_row, everything)[:, 0].expand(batch, seen)  # not padding
    sinks = leading_tokens(real, scorer.sinks)
    in_window = torch.zeros(seen, dtype=torch.bool, device=device)
    in_window[window_positions] = True
    # what an eviction kept stays unless the rule ranks everything again (re-judging it against each new
    # mean would shrink the cache at every eviction)
    judged = everything < (0 if rule.reranks else state.judged_until)
    causal = torch.ones(window, window, dtype=torch.bool, device=device).tril()
    group = query.shape[1] // layer.kv_heads
    scores, protected = [], []
    for head, (keys, values, positions) in enumerate(layer.held()):
        slot = positions.clamp_min(0).long()  # [B, S]
        candidate = (positions >= 0) & real.gather(1, slot) & ~in_window[slot] & ~judged[slot]
        window_slots = (positions[..., None] == window_positions).int().argmax(1)  # [B, w]
        window_keys = keys.gather(1, window_slots[..., None].expand(-1, -1, keys.shape[-1]))
        logits = raw_logits(
            query[:, head * group : (head + 1) * group],
            torch.cat([keys, window_keys], dim=1)[:, None],
            dtype=scorer.dtype,
        )  # [B, group, w, S + w]
        before_row = positions[:, None, :] < window_positions[None, :, None]  # causal, [B, w, S]
        visible = torch.cat([candidate[:, None] & before_row, causal.expand(batch, -1, -1)], dim=-1)
        scores.append(scorer(logits, visible, values[:, None])[:, 0])
        protected.append((positions >= 0) & (in_window[slot] | judged[slot] | sinks.gather(1, slot)))
    return Scored(torch.cat(scores, dim=-1), torch.cat(protected, dim=-1), [s.shape[-1] for s in scores], 0)


def apply_decoded(
    layer: RCLayer, state: LayerState, scored: Scored, keep: torch.Tensor, threshold: torch.Tensor | None
) -> None:
    """Keep the ``[B, S]`` ``keep`` slots of a decode-time eviction and record what each head holds."""
    layer.keep_slots(list(keep.split(scored.slots, dim=-1)))
    seen, batch = layer.seen, keep.shape[0]
    held = torch.zeros(batch, layer.kv_heads, seen + 1, dtype=torch.bool, device=keep.device)  # +1: pads
    for head, (_, _, positions) in enumerate(layer.held()):
        held[:, head].scatter_(1, positions.long().masked_fill(positions < 0, seen), True)
    state.decode_evictions.append(DecodeRecord(seen, held[..., :seen], threshold))
    state.decoded, state.judged_until = 0, seen - state.recent.shape[-2]
