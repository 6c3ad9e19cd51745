"""Brute-force references for RCKVCache: its window scores in Python loops, and checks that its logits equal
full-cache attention masking exactly what it evicted."""

from __future__ import annotations

import numpy as np
import torch

from rcattr.kvcache import RCKVCache
from tests.helpers.models import prompt
from tests.reference.logits import evicted_reference_logits, next_logits
from tests.reference.stats import brute_bounds


def brute_scores(
    logits: torch.Tensor, visible: torch.Tensor, kv_heads: int, reduce: str, statistic: str = "expected"
) -> torch.Tensor:
    """score_h(i) = mean over visible window queries j of mean over Y of max(f(i, j) - y, 0), or the upper
    bound of that expectation over every coupling of {f(i, j)} and Y."""
    batch, heads, w, n = logits.shape
    out = torch.full((batch, heads, n - w), float("nan"), dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            ys = [
                logits[b, h, j, n - w + i].item()
                for j in range(w)
                for i in range(w)
                if visible[b, j, n - w + i]
            ]
            for i in range(n - w):
                xs = [logits[b, h, j, i].item() for j in range(w) if visible[b, j, i]]
                if not xs:
                    continue
                if statistic == "expected":
                    out[b, h, i] = sum(max(x - y, 0.0) for x in xs for y in ys) / (len(xs) * len(ys))
                else:
                    out[b, h, i] = brute_bounds(np.array(xs), np.array(ys))[1]
    grouped = out.view(batch, kv_heads, heads // kv_heads, n - w)
    return grouped.mean(2) if reduce == "mean" else grouped.amax(2)


def assert_equals_masking_the_evicted_positions(model, cache, ids, mask, chunks) -> None:
    """The next tokens' logits through ``cache`` equal full-cache attention masking what it evicted."""
    got = next_logits(model, cache, ids, mask, chunks)
    assert 0.1 < cache.compression_ratio < 0.9
    want = evicted_reference_logits(model, cache, ids, mask, chunks)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-4)


def assert_decode_time_eviction_is_exact(model, batch, pad, budget, policy=None) -> None:
    """Three decode-time evictions (every 3 tokens, window 4) through ``RCKVCache(model, c=1.0 or budget=...)``
    or ``policy``: the logits equal masking what was evicted, the windows stay, something older goes; a
    budget shared by every layer and head holds."""
    ids, mask = prompt(batch=batch, pad=pad)
    chunks = [torch.randint(3, 120, (batch, 1)) for _ in range(11)]
    if policy is None:
        threshold = {"c": 1.0} if budget is None else {"budget": budget}
        cache = RCKVCache(model, window=4, decode_every=3, **threshold)
    else:
        cache = RCKVCache(model, window=4, policy=policy)
    question_window = policy is not None and policy.decode is not None and policy.decode.windows == 2
    got = next_logits(model, cache, ids, mask, chunks)
    want = evicted_reference_logits(model, cache, ids, mask, chunks)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-4)
    for state in cache.states.values():
        assert [d.seen for d in state.decode_evictions] == [43, 46, 49]
        for eviction in state.decode_evictions:
            held = eviction.held
            assert held[..., -4:].all()  # the window stays
            if question_window:
                assert held[..., 36:40].all()  # so does the prompt's (the last chunk's) window
            before = held[..., : eviction.seen - 4]
            assert not before.all()  # something older was evicted
    if budget is not None:  # shared by every layer and head ("model" scope)
        for evictions in zip(*(state.decode_evictions for state in cache.states.values()), strict=True):
            held = torch.stack([e.held.sum((1, 2)) for e in evictions])  # [layers, B]
            assert int(held.sum(0).max()) <= budget * evictions[0].held.shape[1] * len(evictions)
