"""The score a predictor learns: KVzip's, each context key's largest attention weight from the queries of a replay
of the context (the context, [`REPLAY_PROMPT`][rcattr.kvcache.replay.REPLAY_PROMPT], the context again), over the query heads
of its key head; and each evicting layer's attention input for the same keys, what the predictor reads."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from rcattr.eval.kv.methods import attention_scale
from rcattr.eval.kv.scorers import SoftmaxMaxScorer
from rcattr.kvcache import EvictionPolicy, Ratio, RCKVCache
from rcattr.kvcache.context.prompt import split_prompt
from rcattr.kvcache.distilled import attention_inputs
from rcattr.kvcache.replay import REPLAY_PROMPT
from rcattr.protocols import TokenizerLike
from rcattr.runtime.compat import cache_argument

__all__ = ["FLOOR", "TeacherScores", "replay_teacher"]

FLOOR = 1e-7  # the smallest attention weight taken before the log: weights below it mean "never read" alike


@dataclass(frozen=True)
class TeacherScores:
    """One context's replay scores and attention inputs, per evicting layer index.

    Attributes
    ----------
    hidden : dict of int to torch.Tensor
        `[n, d]` float16, the attention input of each context token.
    target : dict of int to torch.Tensor
        `[Hkv, n]` float32, the log of each key's replay score (at least `log(FLOOR)`).
    """

    hidden: dict[int, torch.Tensor]
    target: dict[int, torch.Tensor]


@torch.no_grad()
def replay_teacher(model: PreTrainedModel, tokenizer: TokenizerLike, text: str) -> TeacherScores:
    """The replay scores of `text` given as the KV benchmark gives a context (the chat template's user turn cut
    after it, [`split_prompt`][rcattr.kvcache.context.prompt.split_prompt]), from one forward over `2n + p` tokens
    ([`replay_prefill`][rcattr.kvcache.replay.replay_prefill]'s), for every full-attention layer."""
    context_ids = split_prompt(tokenizer, text, REPLAY_PROMPT).context_ids
    prompt_ids = split_prompt(tokenizer, "context", REPLAY_PROMPT).question_ids
    scorer = SoftmaxMaxScorer(value_norm=False, sinks=0, scale=attention_scale(model))
    with RCKVCache(model, policy=EvictionPolicy(Ratio(0.0, scope="head"), scorer)) as cache:
        layers = cache.rc_layers
        inputs = torch.cat([context_ids, prompt_ids, context_ids], dim=1)
        # replay_prefill's forward, whose cache is thrown away: sliding-window layers (Gemma-3) may hold the
        # replay's entries, as only the full-attention layers' scores are read
        with attention_inputs(model, layers) as held, cache.replaying(context_ids.shape[1]):
            model.model(input_ids=inputs, **cache_argument(model.model, cache))
        n = context_ids.shape[1]
        target = {}
        for layer, eviction in zip(layers, [cache.evictions[i] for i in layers], strict=True):
            assert eviction is not None  # every layer scored the replay
            target[layer] = eviction.scores[0, :, :n].float().clamp_min(FLOOR).log()
        hidden = {layer: held[layer][0, :n].to(torch.float16) for layer in layers}
    return TeacherScores(hidden, target)
