"""Chunked prefill: a long prompt fed to a cache `chunk_size` tokens at a time, so that an
[`RCKVCache`][rcattr.kvcache.cache.RCKVCache] compresses each chunk before the next arrives and never holds much more than
what it keeps plus one chunk (one forward over the whole prompt holds all of it until the last layer has
scored). Any other transformers cache is filled the same way, uncompressed.

Each chunk is scored against its own last `window` queries and cut by the cache's rule over that chunk alone
(a ratio evicts that share of every chunk; a threshold is `c` times the mean score of the chunk): entries an
earlier chunk kept stay. One forward instead scores every prompt token against the prompt's last window and
decides over the whole prompt at once; docs/benchmarks/kv-cache.md measures what the difference costs.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from transformers import Cache, PreTrainedModel

from rcattr.kvcache.cache import RCKVCache
from rcattr.kvcache.policy import TokenBudget
from rcattr.runtime.compat import cache_argument

__all__ = ["DEFAULT_PREFILL_CHUNK", "check_chunkable", "chunked_prefill"]

DEFAULT_PREFILL_CHUNK = 1024
"""Tokens per forward of [`chunked_prefill`][rcattr.kvcache.prefill.chunked_prefill] (docs/benchmarks/kv-cache.md, "The cache at long
contexts")."""


@torch.no_grad()
def chunked_prefill(
    model: PreTrainedModel,
    cache: Cache,
    input_ids: torch.Tensor,
    *,
    chunk_size: int = DEFAULT_PREFILL_CHUNK,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Fill `cache` with `input_ids [B, n]`, `chunk_size` tokens per forward; an RCKVCache compresses
    every chunk ([`RCKVCache.compressing`][rcattr.kvcache.RCKVCache.compressing]) as it arrives.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM (`cache` is open on it when it is an RCKVCache).
    cache : transformers.Cache
        Empty, or holding earlier turns: the new tokens continue at `cache.get_seq_length()`.
    input_ids : torch.Tensor
        `[B, n]` the prompt's new tokens.
    chunk_size : int, optional
        Tokens per forward ([`DEFAULT_PREFILL_CHUNK`][rcattr.kvcache.prefill.DEFAULT_PREFILL_CHUNK] by default). With left padding the first chunk also holds the longest padding, so that every
        row ends it on a real token.
    attention_mask : torch.Tensor, optional
        `[B, past + n]` (1: a real token), as `model.generate` takes it; positions follow it, as
        `generate` gives them.

    Returns
    -------
    torch.Tensor
        `[B, vocab]` the logits of the token after the prompt.

    Examples
    --------
    >>> prompt = split_prompt(tokenizer, document, "What did the report conclude?")
    >>> cache = RCKVCache(model, ratio=0.5)
    >>> logits = chunked_prefill(model, cache, prompt.context_ids, chunk_size=1024)
    >>> ids = torch.cat([prompt.context_ids, prompt.question_ids], 1)
    >>> model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=64, **cache_argument(model, cache))

    `model.generate(..., prefill_chunk_size=N)` inside `with cache.compressing():` does the same for the
    whole prompt, question included.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
    if input_ids.ndim != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must be [batch, n] with n >= 1, got shape {tuple(input_ids.shape)}")
    past, n = cache.get_seq_length(), input_ids.shape[1]
    limit = getattr(model.config.get_text_config(), "max_position_embeddings", None)
    if limit is not None and past + n > limit:
        raise ValueError(f"{past + n} tokens do not fit in {type(model).__name__}'s window of {limit}")
    if attention_mask is not None and tuple(attention_mask.shape) != (input_ids.shape[0], past + n):
        raise ValueError(
            f"attention_mask must be [batch, past + n] = {[input_ids.shape[0], past + n]}, got "
            f"{list(attention_mask.shape)}"
        )
    check_chunkable(cache)
    positions = None
    if attention_mask is not None:
        positions = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)
    padding = 0 if attention_mask is None else int((attention_mask[:, past:] == 0).sum(-1).max())
    ends = [*range(min(padding + chunk_size, n), n, chunk_size), n]
    logits = None
    with cache.compressing() if isinstance(cache, RCKVCache) else nullcontext():
        start = 0
        for end in ends:
            chunk = {"input_ids": input_ids[:, start:end]}
            if attention_mask is not None and positions is not None:
                chunk |= {
                    "attention_mask": attention_mask[:, : past + end],
                    "position_ids": positions[:, past + start : past + end],
                }
            logits = model(**chunk, **cache_argument(model, cache), logits_to_keep=1).logits
            start = end
    assert logits is not None  # ends is never empty
    return logits[:, -1]


def check_chunkable(cache: Cache) -> None:
    """Raise `ValueError` if `cache` cannot be filled chunk by chunk: an RCKVCache whose rule is a
    [`TokenBudget`][rcattr.kvcache.policy.TokenBudget] (it bounds the whole cache, and chunks are cut one at a time)."""
    if isinstance(cache, RCKVCache) and isinstance(cache.policy.rule, TokenBudget):
        raise ValueError(
            "a TokenBudget bounds the whole cache, and a chunked prefill cuts each chunk on its own (to the "
            "budget each); give the cache a ratio or a threshold c"
        )
