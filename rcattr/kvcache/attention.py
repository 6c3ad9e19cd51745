"""The attention path of :class:`~rcattr.kvcache.RCKVCache`.

``Cache.update`` sees keys and values but never queries, and after eviction every key head holds
different tokens, which the model's mask (one per batch row, shared by all heads) cannot describe.
So the cache routes the model's attention through a wrapper of its own implementation (sdpa or
eager): right after an :class:`RCLayer` update, the wrapper of that layer

- until something is evicted, runs the original kernel unchanged;
- once heads hold different tokens, runs the kernel once per key head, on that head's query heads
  and stored slots, with a mask read from the model's own at the slots' positions
  (:meth:`RCLayer.slot_mask`). One call per key head is the price of storing no padding between
  heads (a varlen kernel, as AdaKV uses on GPU, would make it one call);
- after the prefill, and after every later forward of more than one token (a chat's next turn), hands
  the queries to the layer to score and evict that chunk.

For any other cache the wrapper calls the original kernel with the original arguments.
The update and the attention call of a layer are paired by the identity of the key tensor the
cache returned, so a stale pairing can never leak into another cache's forward; a cache fed by a
model other than its own (whose attention never claims the update, or whose modules are not the
cache's model's) is refused.
"""

from __future__ import annotations

import threading

import torch
from transformers import PreTrainedModel

from rcattr._compat import (
    WRAPPER_PREFIXES,
    AttentionFunction,
    attention_function,
    base_implementation,
)
from rcattr.capture import check_supported
from rcattr.kvcache.layer import RCLayer
from rcattr.routing import route, unroute

__all__ = ["expect_attention", "install", "uninstall"]

_PREFIX = WRAPPER_PREFIXES["kvcache"]


class _Pending(threading.local):
    layer: RCLayer | None = None
    keys: torch.Tensor | None = None
    modules: frozenset[int] = frozenset()


_PENDING = _Pending()


def install(model: PreTrainedModel) -> None:
    """Route ``model``'s attention through the RCKVCache wrapper of its sdpa or eager kernel, until as many
    :func:`uninstall` calls. The wrapper is transparent for every other cache."""
    check_supported(model)
    route(model, _PREFIX, _kv_attention)


def uninstall(model: PreTrainedModel) -> None:
    """Release one :func:`install`; the last one gives the model its own attention back."""
    unroute(model, _PREFIX)


def expect_attention(layer: RCLayer, keys: torch.Tensor, modules: frozenset[int]) -> None:
    """Called by the cache after ``layer`` returned ``keys``: the next attention call is that layer's.

    ``modules`` are the ids of the modules of the cache's model, the only ones that may claim it.
    """
    stale_layer = _PENDING.layer
    if stale_layer is not None and _PENDING.modules is modules and stale_layer.layer_idx < layer.layer_idx:
        stale = stale_layer.layer_idx
        _PENDING.layer = _PENDING.keys = None
        raise RuntimeError(
            f"the attention of layer {stale} never read what RCKVCache stored: the cache is being filled "
            "by a model other than the one it was created for; create one RCKVCache per model"
        )
    _PENDING.layer, _PENDING.keys, _PENDING.modules = layer, keys, modules


def _claim(module: torch.nn.Module, key: torch.Tensor) -> RCLayer | None:
    layer, keys = _PENDING.layer, _PENDING.keys
    _PENDING.layer = _PENDING.keys = None
    if layer is None or layer.layer_idx != getattr(module, "layer_idx", None):
        return None
    if id(module) not in _PENDING.modules:
        raise RuntimeError(
            f"{type(module).__name__} (layer {layer.layer_idx}) belongs to a model other than the one this "
            "RCKVCache was created for; create one RCKVCache per model"
        )
    if keys is not key:
        raise NotImplementedError(
            f"{type(module).__name__} changed the keys between the cache update and the attention call; "
            "RCKVCache cannot map its per-head slots onto them"
        )
    return layer


def _kv_attention(inner_name: str) -> AttentionFunction:
    """An attention function that runs ``inner_name`` on RCKVCache's per-head slots."""
    additive_mask = base_implementation(inner_name) == "eager"

    def attention(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        *args: object,  # transformers passes the rest by keyword; kvpress's patch passes dropout by position
        **kwargs: object,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        inner = attention_function(inner_name, module)
        layer = _claim(module, key)
        if layer is None:
            return inner(module, query, key, value, attention_mask, *args, **kwargs)
        output: tuple[torch.Tensor, torch.Tensor | None]
        if layer.packed:
            output = per_head(layer, inner, module, query, key, value, attention_mask, *args, **kwargs)
        else:
            output = inner(module, query, key, value, attention_mask, *args, **kwargs)
        if not layer.prefilled or query.shape[-2] > 1:  # the prompt, or a later turn's chunk
            layer.evict(query, attention_mask)
        return output

    def per_head(
        layer: RCLayer,
        inner: AttentionFunction,
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        *args: object,
        **kwargs: object,
    ) -> tuple[torch.Tensor, None]:
        """The kernel run once per key head on its stored slots."""
        visible = layer.slot_mask(attention_mask, query.shape[-2])
        mask = visible
        if visible is not None and additive_mask:
            blocked = torch.finfo(query.dtype).min
            mask = torch.zeros(visible.shape, dtype=query.dtype, device=query.device).masked_fill_(
                ~visible, blocked
            )
        group = query.shape[1] // layer.kv_heads
        outputs = [
            inner(
                module,
                query[:, head * group : (head + 1) * group],
                key[:, :, segment],
                value[:, :, segment],
                None if mask is None else mask[..., segment],
                *args,
                **kwargs,
            )[0]
            for head, segment in enumerate(layer.segments())
        ]
        return torch.cat(outputs, dim=2), None  # [B, q, H, d]

    return attention
