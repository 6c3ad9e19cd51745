"""RCKVCache's hook in rcattr's attention layer (:mod:`rcattr.attention`).

``Cache.update`` sees keys and values but never queries, and after eviction every key head holds
different tokens, which the model's mask (one per batch row, shared by all heads) cannot describe.
So the cache adds a hook to its model's attention: right after an :class:`RCLayer` update, the
attention call of that layer

- until something is evicted, runs the model's kernel unchanged;
- once heads hold different tokens, runs once per key head, on that head's query heads and stored
  slots, where the model's own mask allows at the slots' positions (:meth:`RCLayer.attend`);
- after the prefill, and after every later forward of more than one token (a chat's next turn), hands
  the call to the layer to score and evict that chunk;
- with ``decode_every=n``, after every n-th decoded token, hands the call to the layer to score all it
  holds against the last ``window`` queries and evict (:meth:`RCLayer.evict_decoded`).

Calls that fill another cache pass through unchanged. The update and the attention call of a layer are
paired by the identity of the key tensor the cache returned, so a stale pairing can never leak into
another cache's forward; a cache fed by a model other than its own (whose attention never claims the
update) is refused.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import torch

from rcattr.attention import AttentionCall, AttentionOutput
from rcattr.kvcache.layer import RCLayer

__all__ = ["CacheHook"]


class _Pending(threading.local):
    layer: weakref.ref[RCLayer] | None = None
    keys: torch.Tensor | None = None


class CacheHook:
    """Pairs each :class:`RCLayer` update of one cache with the attention call that reads it."""

    def __init__(self) -> None:
        self._pending = _Pending()

    def expect(self, layer: RCLayer, keys: torch.Tensor) -> None:
        """Called by the cache after ``layer`` returned ``keys``: the next attention call is that layer's."""
        pending = self._pending
        stale = pending.layer() if pending.layer is not None else None
        if stale is not None and stale.layer_idx < layer.layer_idx:
            pending.layer = pending.keys = None
            raise RuntimeError(
                f"the attention of layer {stale.layer_idx} never read what RCKVCache stored: the cache is being "
                "filled by a model other than the one this RCKVCache was created for; create one RCKVCache per model"
            )
        pending.layer, pending.keys = weakref.ref(layer), keys

    def __call__(self, call: AttentionCall, proceed: Callable[[], AttentionOutput]) -> AttentionOutput:
        layer = self._claim(call)
        if layer is None:
            return proceed()
        call.start = layer.seen - call.query.shape[-2]  # the cache knows where its tokens sit
        output = (layer.attend(call), None) if layer.packed else proceed()
        chunk = not layer.prefilled or call.query.shape[-2] > 1  # the prompt, or a later turn's chunk
        every = layer.policy.decode_every
        if every is not None:
            layer.observe(call.query)
        if chunk:
            layer.evict(call)
        elif every is not None:
            layer.decoded += 1
            if layer.decoded >= every:
                layer.evict_decoded(call)
        return output

    def _claim(self, call: AttentionCall) -> RCLayer | None:
        pending = self._pending
        layer, keys = (pending.layer() if pending.layer is not None else None), pending.keys
        if layer is None or layer.layer_idx != call.layer_idx:
            return None
        pending.layer = pending.keys = None
        if keys is not call.key:
            raise NotImplementedError(
                f"{type(call.module).__name__} changed the keys between the cache update and the attention "
                "call; RCKVCache cannot map its per-head slots onto them"
            )
        return layer
