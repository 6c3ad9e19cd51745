"""Scoring what one [`RCLayer`][rcattr.kvcache.layer.RCLayer] holds, the step the layer runs after its attention:
pure functions of the layer and the call, whose scores ([`rcattr.kvcache.scored`][rcattr.kvcache.scored]) go to the
rule ([`Rule.decide`][rcattr.kvcache.Rule.decide]); the layer cuts what the rule decides.

Every compressed forward of more than one token (the prompt, and a later turn of a chat fed to the same cache
where the policy's `chunks` or [`RCKVCache.compressing`][rcattr.kvcache.RCKVCache.compressing] says so) is
a chunk: its tokens are scored against the chunk's own last `window` queries and evicted after its attention
has run; entries kept from earlier chunks stay. A prefill that replays its context scores the context against
the replay instead ([`score_replayed`][rcattr.kvcache.eviction.score_replayed]). With decode-time eviction, every `every` decoded tokens
all that a layer holds is scored against its last window of queries ([`score_decoded`][rcattr.kvcache.eviction.score_decoded]).
"""

from __future__ import annotations

import torch

from rcattr.kvcache.headwise import HeadwiseLayer
from rcattr.kvcache.policy import DecodeEviction, Rule
from rcattr.kvcache.scored import ChunkScores, DecodeScores
from rcattr.kvcache.scoring import WindowScorer, leading_tokens
from rcattr.kvcache.state import LayerState
from rcattr.runtime.attention import AttentionCall
from rcattr.runtime.capture import raw_logits

__all__ = ["score_chunk", "score_decoded", "score_replayed"]


def score_chunk(layer: HeadwiseLayer, call: AttentionCall, window: int, scorer: WindowScorer) -> ChunkScores:
    """Score every key of the chunk just stored that comes before its last `window` tokens, against the
    chunk's last `window` queries (`call` is the chunk's attention call: its queries `[B, H, n, d]`
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
    if n > window and scorer.reads_hidden_states:
        hidden = layer.hidden
        if hidden is None or hidden.shape[-2] != n:
            raise RuntimeError(
                f"layer {call.layer_idx} got no attention input for its {n} new tokens: the model's attention "
                "module was not called with this cache"
            )
        before = scorer.hidden_state_scores(
            call.layer_idx,
            hidden[:, : n - window],
            values,
            lambda: scorer(raw_logits(query[:, :, -window:], keys, dtype=scorer.dtype), visible, values),
        )
        before = before.masked_fill(~visible[:, None, -1, : n - window], float("nan"))  # padding
    elif n > window:
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


def score_replayed(
    layer: HeadwiseLayer, call: AttentionCall, context: int, scorer: WindowScorer
) -> ChunkScores:
    """Score the first `context` tokens against a replay of them.

    `call` is the attention call of a prefill that reads the context, a prompt, then the context again
    (the replay, its last `context` tokens): every context key is scored against the replay's queries
    (the window). The scores are the context's alone, to be cut by the rule (window 0: no query of the
    context is protected but the sinks); the layer then forgets the prompt and the replay
    ([`RCLayer.forget_after`][rcattr.kvcache.layer.RCLayer.forget_after]).
    """
    scored = score_chunk(layer, call, context, scorer)
    batch, kv_heads = scored.present.shape[0], len(scored.slots)
    if scored.start != 0 or layer.seen < 2 * context:
        raise ValueError(
            "a replay is scored in the prefill, which must hold the context, a prompt and the context"
        )
    first = [part.view(batch, kv_heads, -1)[..., :context] for part in (scored.scores, scored.protected)]
    return ChunkScores(
        first[0].reshape(batch, -1),
        first[1].reshape(batch, -1),
        [context] * kv_heads,
        0,
        scored.present[:, :context],
        0,
    )


def score_decoded(
    layer: HeadwiseLayer,
    state: LayerState,
    call: AttentionCall,
    decode: DecodeEviction,
    rule: Rule,
    scorer: WindowScorer,
) -> DecodeScores:
    """Score the entries `layer` holds against the queries `decode` names (the last window), with the
    prefill's statistic: every entry if `rule` ranks everything again, else those no eviction has judged.
    The windows and the sinks are protected. `call` is the current decoding step's attention call."""
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
    return DecodeScores(
        torch.cat(scores, dim=-1), torch.cat(protected, dim=-1), [s.shape[-1] for s in scores], 0
    )
