"""The same prompt answered with the full KV cache and with a compressed one, compared token by token."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import Cache

from rcattr.protocols import TokenizerLike
from rcattr.runtime.compat import cache_argument
from rcattr.runtime.generation import model_window
from rcattr.text.prompting import ContextInput, render_prompt

__all__ = ["AnswerAgreement", "Comparison", "compare_generations"]


@dataclass(frozen=True)
class AnswerAgreement:
    """How far two generations of the same prompt agree, token by token.

    Attributes
    ----------
    first_difference : int or None
        Index of the first token where they differ (None: identical).
    agreement : float
        Share of positions, up to the longer one's length, holding the same token in both.
    length : int
        The longer generation's length in tokens.
    """

    first_difference: int | None
    agreement: float
    length: int

    @classmethod
    def of(cls, reference: Sequence[int], other: Sequence[int]) -> AnswerAgreement:
        length = max(len(reference), len(other))
        same = [a == b for a, b in zip(reference, other, strict=False)]
        first = next((i for i, equal in enumerate(same) if not equal), None)
        if first is None and len(reference) != len(other):
            first = len(same)
        return cls(first, sum(same) / length if length else 1.0, length)


@dataclass(frozen=True)
class Comparison:
    """Greedy answers of one prompt with the full cache and with `cache`.

    Attributes
    ----------
    prompt_tokens : int
    full, compressed : list of int
        The generated token ids (prompt excluded).
    agreement : AnswerAgreement
    """

    prompt_tokens: int
    full: list[int]
    compressed: list[int]
    agreement: AnswerAgreement


@torch.no_grad()
def compare_generations(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    inp: ContextInput,
    cache: Cache,
    max_new_tokens: int,
    prefill_chunk: int | None = None,
) -> Comparison:
    """Answer `inp` greedily twice, with transformers' `DynamicCache` and with `cache`, and compare; with
    `prefill_chunk`, `cache` is filled that many prompt tokens per forward, an RCKVCache cutting each chunk
    before the next (`generate`'s `prefill_chunk_size` inside [`RCKVCache.compressing`][rcattr.kvcache.RCKVCache.compressing]).
    """
    from rcattr.kvcache.cache import RCKVCache
    from rcattr.kvcache.prefill import check_chunkable

    chunked = isinstance(cache, RCKVCache) and prefill_chunk is not None
    if prefill_chunk is not None:
        check_chunkable(cache)
    prompt = render_prompt(tokenizer, inp)
    inputs = tokenizer(prompt.text, return_tensors="pt", add_special_tokens=prompt.add_special_tokens)
    prompt_tokens = inputs["input_ids"].shape[1]
    window = model_window(model)
    if window is not None and prompt_tokens >= window:
        raise ValueError(
            f"the prompt ({prompt_tokens} tokens) leaves no room for an answer in the model's window of {window} "
            "positions; shorten the context"
        )
    if window is not None and prompt_tokens + max_new_tokens > window:
        warnings.warn(
            f"max_new_tokens={max_new_tokens} lowered to {window - prompt_tokens}: the prompt takes "
            f"{prompt_tokens} of the model's {window} positions",
            stacklevel=3,  # the caller of compare_generations()
        )
        max_new_tokens = window - prompt_tokens
    generated = []
    for past in (DynamicCache(config=model.config), cache):
        chunks = {"prefill_chunk_size": prefill_chunk} if past is cache and prefill_chunk is not None else {}
        with cache.compressing() if chunked and past is cache else nullcontext():  # type: ignore[attr-defined]
            out = model.generate(  # type: ignore[operator]  # transformers types generate as a Tensor
                **inputs.to(model.device),
                **cache_argument(model, past),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.eos_token_id,
                **chunks,
            )
        generated.append(out[0, prompt_tokens:].tolist())
    full, compressed = generated
    return Comparison(prompt_tokens, full, compressed, AnswerAgreement.of(full, compressed))
