"""Reference logits for exactness tests: q and k recorded from an eager run, recomputed in float64."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from transformers import DynamicCache

from rcattr.runtime.attention import mask_allows
from rcattr.runtime.compat import cache_argument, register_attention


@contextmanager
def record_eager_qk(model: torch.nn.Module) -> Iterator[dict[int, list[tuple[torch.Tensor, torch.Tensor]]]]:
    """Record the (query, key) every attention layer passes to the modeling file's own
    ``eager_attention_forward``; the model must use ``attn_implementation="eager"``."""
    attention = next(m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "scaling"))
    modeling = sys.modules[type(attention).__module__]
    original = modeling.eager_attention_forward
    records: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    def recording(module, query, key, value, attention_mask, **kwargs):
        records.setdefault(module.layer_idx, []).append((query.detach().clone(), key.detach().clone()))
        return original(module, query, key, value, attention_mask, **kwargs)

    modeling.eager_attention_forward = recording
    try:
        yield records
    finally:
        modeling.eager_attention_forward = original


def float64_logits(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """``[B, H, q, K]`` = q·kᵀ in float64 with key heads repeated for grouped-query attention."""
    groups = query.shape[1] // key.shape[1]
    key = key.double().repeat_interleave(groups, dim=1)
    return query.double() @ key.transpose(-1, -2)


_KEEP: dict[int, torch.Tensor] = {}  # layer -> [B, Hkv, n] prompt tokens the reference lets through


def _reference_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """Plain float64 attention over the full cache with the evicted prompt positions masked per head."""
    batch, heads, q_len, _ = query.shape
    groups = heads // key.shape[1]
    key_len = key.shape[-2]
    if attention_mask is None:
        allowed = (torch.arange(key_len) <= torch.arange(key_len - q_len, key_len)[:, None])[None, None]
    else:
        allowed = mask_allows(attention_mask)
    allowed = allowed.expand(batch, heads, q_len, key_len).clone()
    keep = _KEEP.get(module.layer_idx)
    if keep is not None:
        allowed[..., : keep.shape[-1]] &= keep.repeat_interleave(groups, 1)[:, :, None, :]
    k = key.repeat_interleave(groups, 1).double()
    v = value.repeat_interleave(groups, 1).double()
    scores = (query.double() @ k.transpose(-1, -2)) * (scaling or module.scaling)
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return (weights @ v).transpose(1, 2).to(query.dtype).contiguous(), None


register_attention("rcattr_test_reference", _reference_attention, mask_like="sdpa")


def evicted_reference_logits(model, cache, ids, mask, chunks) -> list[torch.Tensor]:
    """:func:`next_logits` through a full ``DynamicCache``, each chunk attending through float64 attention
    that masks, per head, exactly the positions ``cache`` (an RCKVCache) had evicted before that chunk:
    the prompt's, those of earlier chunks of more than one token, and those of decode-time evictions
    (each says what every head held of all positions seen then), applied in the order they were made."""

    def mask_evicted(seen: int) -> None:
        _KEEP.clear()
        for index, state in cache.states.items():
            made = [(e.start + e.kept.shape[-1], e.start, e.kept) for e in state.evictions]
            made += [(d.seen, 0, d.held) for d in state.decode_evictions]
            made = sorted((m for m in made if m[0] <= seen), key=lambda m: m[0])
            if not made:
                continue
            keep = torch.ones(*made[0][2].shape[:2], seen, dtype=torch.bool)
            for _, start, kept in made:
                keep[..., start : start + kept.shape[-1]] = kept
            _KEEP[index] = keep

    reference = DynamicCache(config=model.config)
    return next_logits(
        model, reference, ids, mask, chunks, "rcattr_test_reference", before_chunk=mask_evicted
    )


def next_logits(
    model, cache, ids, mask, chunks, chunk_attention=None, before_chunk=None
) -> list[torch.Tensor]:
    """Prefill ``ids`` into ``cache``, then feed each chunk of new tokens (through ``chunk_attention``
    when given, after calling ``before_chunk(tokens seen)``); the logits of every chunk."""
    model(ids, attention_mask=mask, **cache_argument(model, cache))
    implementation = model.config._attn_implementation
    model.set_attn_implementation(chunk_attention or implementation)
    out = []
    try:
        for chunk in chunks:
            if before_chunk is not None:
                before_chunk(mask.shape[-1])
            mask = torch.cat([mask, torch.ones_like(chunk)], dim=-1)
            out.append(model(chunk, attention_mask=mask, **cache_argument(model, cache)).logits)
    finally:
        model.set_attn_implementation(implementation)
    return out


def forward_log_probs(model, prompt_ids: list[int], answer_ids: list[int]) -> torch.Tensor:
    """log p of each answer token after ``prompt_ids``, by a plain forward: [A]."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + answer_ids])).logits[0].double()
    rows = logits[len(prompt_ids) - 1 : -1].log_softmax(-1)
    return rows[torch.arange(len(answer_ids)), torch.tensor(answer_ids)]
