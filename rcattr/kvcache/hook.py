"""RCKVCache's hook in rcattr's attention layer ([`rcattr.runtime.attention`][rcattr.runtime.attention]).

`Cache.update` sees keys and values but never queries, and after eviction every key head holds
different tokens, which the model's mask (one per batch row, shared by all heads) cannot describe.
So the cache adds a hook to its model's attention: the attention call that follows an evicting layer's
update is handed to the cache (`RCKVCache.attention`), which routes it to that layer
([`RCLayer.attention`][rcattr.kvcache.RCLayer.attention]), which

- until something is evicted, runs the model's kernel unchanged;
- once heads hold different tokens, runs once per key head, on that head's query heads and stored
  slots, where the model's own mask allows at the slots' positions (`RCLayer.attend`);
- after the prefill (and a later forward of more than one token, a chat's next turn, where the policy
  compresses it), scores and evicts that chunk, and with decode-time eviction does so every `every`
  decoded tokens.

Calls that fill another cache pass through unchanged. The update and the attention call of a layer are
paired by the identity of the key tensor the cache returned, so a stale pairing can never leak into
another cache's forward; a cache fed by a model other than its own (whose attention never claims the
update) is refused. The hook holds its cache weakly: the model's routes never keep a cache alive.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Protocol

import torch

from rcattr.runtime.attention import AttentionCall, AttentionOutput

__all__ = ["CacheHook"]


class _Attends(Protocol):
    """What the hook hands a paired call to ([`RCKVCache.attention`][rcattr.kvcache.RCKVCache.attention])."""

    def attention(self, call: AttentionCall, proceed: Callable[[], AttentionOutput]) -> AttentionOutput: ...


class _Pending(threading.local):
    layer_idx: int | None = None
    keys: torch.Tensor | None = None


class CacheHook:
    """Pairs each evicting layer's update in one cache with the attention call that reads it."""

    def __init__(self, cache: weakref.ref[_Attends]) -> None:
        self._cache = cache
        self._pending = _Pending()

    def expect(self, layer_idx: int, keys: torch.Tensor) -> None:
        """Called by the cache after layer `layer_idx` returned `keys`: the next attention call is that layer's."""
        pending = self._pending
        stale = pending.layer_idx
        if stale is not None and stale < layer_idx:
            pending.layer_idx = pending.keys = None
            raise RuntimeError(
                f"the attention of layer {stale} never read what RCKVCache stored: the cache is being filled by "
                "a model other than the one this RCKVCache was created for; create one RCKVCache per model"
            )
        pending.layer_idx, pending.keys = layer_idx, keys

    def __call__(self, call: AttentionCall, proceed: Callable[[], AttentionOutput]) -> AttentionOutput:
        pending, cache = self._pending, self._cache()
        if cache is None or pending.layer_idx is None or pending.layer_idx != call.layer_idx:
            return proceed()
        keys, pending.layer_idx, pending.keys = pending.keys, None, None
        if keys is not call.key:
            raise NotImplementedError(
                f"{type(call.module).__name__} changed the keys between the cache update and the attention "
                "call; RCKVCache cannot map its per-head slots onto them"
            )
        return cache.attention(call, proceed)
