"""Scoring a context against a replay of it (KVzip's probe, with any scorer): the prefill reads the context, a
prompt asking to repeat it, then the context again, and every context key is scored against the queries of
the repetition, which attend to what rebuilding the context needs, whatever the question that follows."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from rcattr.kvcache.cache import RCKVCache
from rcattr.runtime.compat import cache_argument

__all__ = ["REPLAY_PROMPT", "replay_prefill"]

REPLAY_PROMPT = "Repeat the previous context exactly."
"""KVzip's reconstruction prompt: what the replay asks between the context and its repetition."""


@torch.no_grad()
def replay_prefill(
    model: PreTrainedModel, cache: RCKVCache, context_ids: torch.Tensor, prompt_ids: torch.Tensor
) -> None:
    """Fill an empty `cache` with `context_ids [1, n]`, compressed by scores against a replay of it.

    One forward reads `context, prompt, context` (`prompt_ids [1, p]`, e.g. the chat template's
    rendering of [`REPLAY_PROMPT`][rcattr.kvcache.replay.REPLAY_PROMPT]); the cache then holds the context alone, cut by its rule, and the
    next token goes at position `n`. It costs a prefill of `2n + p` tokens.
    """
    if context_ids.ndim != 2 or context_ids.shape[0] != 1 or prompt_ids.ndim != 2 or prompt_ids.shape[0] != 1:
        raise ValueError(
            f"replay_prefill takes one row: context_ids and prompt_ids of shape [1, n], got "
            f"{tuple(context_ids.shape)} and {tuple(prompt_ids.shape)}"
        )
    if not cache.policy.scorer.replayable:
        raise ValueError(
            f"{type(cache.policy.scorer).__name__} compares every key with the window's own w x w logits, which for "
            "a replay as long as the context costs O(n^2 log n) per head and layer; give the cache a scorer whose "
            "replayable is True (one reference per query, e.g. rcattr.eval.kv.scorers.QueryMaxScorer)"
        )
    if len(cache.evicting_layers) != len(cache.layers):
        raise NotImplementedError(
            "replay_prefill needs every layer to evict: a sliding-window layer would keep the replay's entries"
        )
    context = context_ids.shape[1]
    inputs = torch.cat([context_ids, prompt_ids.to(context_ids.device), context_ids], dim=1)
    with cache.replaying(context):
        model.model(input_ids=inputs, **cache_argument(model.model, cache))
