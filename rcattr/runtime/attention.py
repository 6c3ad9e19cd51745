"""One attention layer for everything in rcattr that reads a model's queries and keys.

Logit capture ([`LogitCapture`][rcattr.runtime.capture.LogitCapture]) and the KV cache ([`RCKVCache`][rcattr.kvcache.cache.RCKVCache])
both need what the model's attention gets: the queries (`Cache.update` never sees them), the keys, and
which keys each query may see. [`attach`][rcattr.runtime.attention.attach] routes a model's attention through one wrapper of its own
kernel and adds a *hook* to the model's route; each attention call of the model then reaches the hooks
as an [`AttentionCall`][rcattr.runtime.attention.AttentionCall], the newest hook first, and each hook looks at it, runs the rest of the chain
(`proceed()`) or runs the kernel on other tensors ([`AttentionCall.attend`][rcattr.runtime.attention.AttentionCall.attend]). [`detach`][rcattr.runtime.attention.detach] removes
the hook; the last one switches the model back and removes the wrapper from transformers' registries,
so the model and the registries are left exactly as they were.

The wrapper of implementation `impl` is registered as `rcattr_<impl>` with `impl`'s own mask builder,
so the kernel gets the mask it always gets, in the form its implementation uses: `None`, a 4-D
`[B, 1, q, k]` bool (sdpa) or additive (eager) tensor, or a `BlockMask` (flex attention).
[`AttentionCall.visible`][rcattr.runtime.attention.AttentionCall.visible] reads them alike: positions give causality and the sliding window, the
mask gives padding. Logits are always recomputed from the queries and keys, never read from a kernel.
"""

from __future__ import annotations

import copy
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from transformers import PreTrainedModel

from rcattr.protocols import check_model
from rcattr.runtime.compat import (
    AttentionFunction,
    attention_function,
    attention_implementation,
    register_attention,
    set_attention_implementation,
    supports_attention_backend,
    unregister_attention,
)

__all__ = [
    "SUPPORTED_ATTENTION",
    "AttentionCall",
    "AttentionHook",
    "attach",
    "check_supported",
    "detach",
    "is_routed",
    "mask_allows",
]

PREFIX = "rcattr_"
"""The wrapper of implementation `impl` is registered as `PREFIX + impl`."""

_DENSE_MASK_KERNELS = ("sdpa", "eager")  # the kernels that take any [B, 1, q, k] mask


SUPPORTED_ATTENTION = ("sdpa", "eager", "flex_attention")
"""The implementations rcattr wraps. Not flash attention: transformers' flash integration picks its kernel
from the name of the model's implementation, so it cannot run under a wrapper's name."""


AttentionOutput = tuple[torch.Tensor, torch.Tensor | None]


class AttentionCall:
    """One call of a layer's attention, as the model made it.

    Attributes
    ----------
    module : torch.nn.Module
        The attention module (its `layer_idx`, `scaling`, `sliding_window`).
    query : torch.Tensor
        `[B, H, q, d]` after RoPE and any q-norm.
    key, value : torch.Tensor
        `[B, Hkv, k, d]` everything the layer attends to (what the cache returned).
    attention_mask : torch.Tensor, BlockMask or None
        The mask in the form the kernel takes (see the module docstring).
    implementation : str
        The model's own implementation (one of [`SUPPORTED_ATTENTION`][rcattr.runtime.attention.SUPPORTED_ATTENTION]).
    """

    def __init__(
        self,
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: Any,
        implementation: str,
        args: tuple[object, ...] = (),
        kwargs: dict[str, Any] | None = None,
        positions: _Positions | None = None,
    ) -> None:
        self.module, self.query, self.key, self.value = module, query, key, value
        self.attention_mask = attention_mask
        self.implementation = implementation
        self.args, self.kwargs = args, kwargs or {}
        self._positions = positions if positions is not None else _Positions()
        self._start: int | None = None

    @property
    def layer_idx(self) -> int:
        return int(self.module.layer_idx)  # type: ignore[arg-type]  # attention modules set an int

    @property
    def start(self) -> int:
        """Sequence position of the first query: read from the `position_ids` the model passes (with left
        padding, the row without padding carries the sequence index); without them, 0 for a pass whose
        keys are as many as its queries and the continuation of the layer's previous pass otherwise."""
        if self._start is None:
            self._start = self._positions.start(self)
        return self._start

    def starting_at(self, start: int) -> AttentionCall:
        """This call with its first query at sequence position `start` (a cache that evicts knows it)."""
        call = copy.copy(self)
        call._start = start
        return call

    @property
    def query_positions(self) -> torch.Tensor:
        """`[q]` sequence positions of the queries."""
        return torch.arange(self.start, self.start + self.query.shape[-2], device=self.query.device)

    @property
    def key_positions(self) -> torch.Tensor:
        """`[k]` sequence positions of the keys (a sliding-window cache holds only the latest)."""
        end = self.start + self.query.shape[-2]
        return torch.arange(end - self.key.shape[-2], end, device=self.query.device)

    @property
    def sliding_window(self) -> int | None:
        """The layer's window when it is a sliding-window layer."""
        return _number(self.kwargs.get("sliding_window", getattr(self.module, "sliding_window", None)), int)

    @property
    def scaling(self) -> float:
        """The softmax scale the layer applies to the logits."""
        scale = _number(self.kwargs.get("scaling", getattr(self.module, "scaling", None)), float)
        return scale if scale is not None else self.query.shape[-1] ** -0.5

    @property
    def softcap(self) -> float | None:
        return _number(self.kwargs.get("softcap"), float)

    def visible(self, rows: torch.Tensor, key_positions: torch.Tensor | None = None) -> torch.Tensor:
        """`[B or 1, R, K]` bool: which keys the query rows `rows [R]` (indices into the call's queries)
        may see, among the keys at `key_positions [K]` (default: the call's keys).

        Causality and the sliding window come from the positions; padding (and anything else the model
        masks) from the mask, whichever its form. A key the mask does not cover is not visible.
        """
        keys = self.key_positions if key_positions is None else key_positions
        queries = self.start + rows
        allowed = keys[None, :] <= queries[:, None]  # [R, K]
        mask = self.attention_mask
        if mask is None:  # plain causality: the kernel was told is_causal, with the layer's window if any
            window = self.sliding_window
            if window is not None:
                allowed = allowed & (queries[:, None] - keys[None, :] < window)
            return allowed[None]
        dense = _dense_mask(mask, rows)  # [B or 1, R or 1, L], its columns the last L positions
        length = dense.shape[-1]
        columns = keys - (self.start + self.query.shape[-2] - length)
        covered = (columns >= 0) & (columns < length)
        picked = dense[..., columns.clamp(0, length - 1)]
        return allowed[None] & covered & picked

    def proceed(self) -> AttentionOutput:
        """The model's own kernel on the call as it was made."""
        kernel = attention_function(self.implementation, self.module)
        return kernel(
            self.module, self.query, self.key, self.value, self.attention_mask, *self.args, **self.kwargs
        )  # type: ignore[no-any-return]

    def attend(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, visible: torch.Tensor | None
    ) -> torch.Tensor:
        """`[B, q, H', d]` attention of `query [B, H', q, d]` over `key, value [B, Hkv', k, d]` where
        `visible [B, 1, q, k]` (None: every key), with the layer's scale and options.

        sdpa and eager run themselves; flex attention, which compiles for every new shape, runs this
        through sdpa, which gives the same output.
        """
        implementation = self.implementation if self.implementation in _DENSE_MASK_KERNELS else "sdpa"
        mask: torch.Tensor | None = visible
        if visible is not None and implementation == "eager":
            mask = torch.zeros(visible.shape, dtype=query.dtype, device=query.device)
            mask.masked_fill_(~visible, torch.finfo(query.dtype).min)
        kwargs = self.kwargs if implementation == self.implementation else _sdpa_options(self.kwargs)
        kernel = attention_function(implementation, self.module)
        return kernel(self.module, query, key, value, mask, *self.args, **kwargs)[0]  # type: ignore[no-any-return]


def _sdpa_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options sdpa understands, of a call made to another kernel."""
    return {name: kwargs[name] for name in ("dropout", "scaling") if name in kwargs}


def mask_allows(attention_mask: torch.Tensor) -> torch.Tensor:
    """A 4-D attention mask as bool (True attends): sdpa's bool masks as they are, eager's additive float
    masks (0 attends, the dtype's minimum blocks) thresholded."""
    if attention_mask.dtype == torch.bool:
        return attention_mask
    return attention_mask > torch.finfo(attention_mask.dtype).min / 2


def _dense_mask(mask: Any, rows: torch.Tensor) -> torch.Tensor:
    """`[B or 1, R or 1, L]` bool of the mask at query rows `rows`, over the mask's `L` columns."""
    if isinstance(mask, torch.Tensor):
        if mask.dim() == 4:
            return mask_allows(mask[:, 0, rows])
        raise NotImplementedError(
            f"unexpected attention mask of shape {tuple(mask.shape)}: rcattr reads 4-D [batch, 1, queries, "
            "keys] masks and flex attention's BlockMask"
        )
    from torch.nn.attention.flex_attention import BlockMask, create_mask

    if isinstance(mask, BlockMask):
        batch, _, queries, keys = mask.shape
        dense = create_mask(mask.mask_mod, batch, 1, queries, keys, device=rows.device)  # [B, 1, q, L]
        return dense[:, 0, rows]
    raise NotImplementedError(f"unexpected attention mask of type {type(mask).__name__}")


class AttentionHook(Protocol):
    """What [`attach`][rcattr.runtime.attention.attach] adds to a model's route: called with every attention call of the model and the
    rest of the chain, it returns the call's `(output [B, q, H, d], weights or None)`."""

    def __call__(self, call: AttentionCall, proceed: Callable[[], AttentionOutput]) -> AttentionOutput: ...


class _Positions(threading.local):
    """Where each layer's last pass ended, for models that pass no `position_ids`; the last ones read."""

    def __init__(self) -> None:
        self.next: dict[int, int] = {}
        self.read: tuple[torch.Tensor, int | None, int] | None = None  # last position_ids, version, start

    def start(self, call: AttentionCall) -> int:
        q_len, k_len = call.query.shape[-2], call.key.shape[-2]
        given = call.kwargs.get("position_ids")
        if isinstance(given, torch.Tensor) and given.shape[-1] == q_len:
            # read once a pass, not once a layer (the layers share the tensor): a read waits for a GPU's queue
            version = None if given.is_inference() else given._version  # inference tensors keep no version
            if self.read is None or self.read[0] is not given or self.read[1] != version:
                self.read = (given, version, int(given.reshape(-1, q_len)[:, 0].max()))
            start = self.read[2]
        elif k_len == q_len:
            start = 0
        else:  # continuing a cached sequence; first seen with a pre-filled cache: its length
            start = self.next.get(call.layer_idx, k_len - q_len)
        self.next[call.layer_idx] = start + q_len
        return start


@dataclass
class _Route:
    previous: str
    name: str
    modules: frozenset[int]
    hooks: list[AttentionHook] = field(default_factory=list)  # the newest last
    positions: _Positions = field(default_factory=_Positions)


_ROUTES: dict[int, _Route] = {}  # id(model) -> its route
_BY_MODULE: dict[int, _Route] = {}  # id(attention module) -> its model's route
_USES: Counter[str] = Counter()  # registered wrapper name -> routes using it


def check_supported(model: PreTrainedModel) -> None:
    """Raise `NotImplementedError` naming the reason if rcattr cannot read `model`'s attention (`TypeError`
    if `model` is no transformers model)."""
    check_model(model)
    name = type(model).__name__
    if getattr(model.config, "is_encoder_decoder", False):
        raise NotImplementedError(
            f"{name} is an encoder-decoder model; rcattr captures decoder-only causal LMs"
        )
    if not supports_attention_backend(model):
        raise NotImplementedError(
            f"{name} does not route its attention through transformers' AttentionInterface, so its "
            "query/key logits cannot be captured. Supported: decoder-only models that do "
            "(tested: Llama, Mistral, Qwen2, Qwen3, Gemma3, Phi3)."
        )
    implementation = _own_implementation(model)
    if implementation not in SUPPORTED_ATTENTION:
        raise NotImplementedError(
            f"{name} uses attn_implementation={implementation!r}; rcattr supports {list(SUPPORTED_ATTENTION)}"
            " (transformers picks a flash-attention kernel by the implementation's name, which rcattr's "
            "wrapper changes). Reload with attn_implementation='sdpa'."
        )


def _own_implementation(model: PreTrainedModel) -> str:
    route = _ROUTES.get(id(model))
    current = attention_implementation(model)
    return route.previous if route is not None and current == route.name else current


def attach(model: PreTrainedModel, hook: AttentionHook) -> None:
    """Route `model`'s attention through rcattr's wrapper (once per model) and add `hook` to its route.

    Call [`detach`][rcattr.runtime.attention.detach] with the same hook once done (in a `finally` or `__exit__`).
    """
    check_supported(model)
    route = _ROUTES.get(id(model))
    if route is not None and attention_implementation(model) != route.name:
        raise RuntimeError(
            f"the model's attention implementation was switched to {attention_implementation(model)!r} "
            f"while rcattr routes it through {route.name!r}; close rcattr's captures and caches of this "
            "model before calling set_attn_implementation"
        )
    if route is None:
        previous = attention_implementation(model)
        name = PREFIX + previous
        if not _USES[name]:
            register_attention(name, _wrapper(previous), mask_like=previous)
        _USES[name] += 1
        try:
            set_attention_implementation(model, name)
        except BaseException:
            _release(name)
            raise
        modules = frozenset(id(module) for module in model.modules())
        route = _Route(previous, name, modules)
        _ROUTES[id(model)] = route
        _BY_MODULE.update(dict.fromkeys(modules, route))
    route.hooks.append(hook)


def detach(model: PreTrainedModel, hook: AttentionHook) -> None:
    """Remove `hook` from `model`'s route; the last one switches the model back and unregisters."""
    route = _ROUTES.get(id(model))
    if route is None or not any(held is hook for held in route.hooks):
        return
    route.hooks = [held for held in route.hooks if held is not hook]
    if route.hooks:
        return
    del _ROUTES[id(model)]
    for module in route.modules:
        _BY_MODULE.pop(module, None)
    try:
        if attention_implementation(model) == route.name:
            set_attention_implementation(model, route.previous)
    finally:
        _release(route.name)


def is_routed(model: PreTrainedModel) -> bool:
    """Whether `model`'s attention currently goes through rcattr's wrapper."""
    route = _ROUTES.get(id(model))
    return route is not None and attention_implementation(model) == route.name


def _release(name: str) -> None:
    _USES[name] -= 1
    if _USES[name] <= 0:
        del _USES[name]
        unregister_attention(name)


def _wrapper(implementation: str) -> AttentionFunction:
    """The attention function registered around `implementation`: the hooks of the caller's model, then
    the kernel."""

    def attention(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: Any,
        *args: object,  # transformers passes the rest by keyword; kvpress's patch passes dropout by position
        **kwargs: Any,
    ) -> AttentionOutput:
        route = _BY_MODULE.get(id(module))
        if route is None:  # a model that shares the implementation's name but is not routed (e.g. a copy)
            kernel = attention_function(implementation, module)
            return kernel(module, query, key, value, attention_mask, *args, **kwargs)  # type: ignore[no-any-return]
        call = AttentionCall(
            module, query, key, value, attention_mask, implementation, args, kwargs, route.positions
        )
        return _through(list(reversed(route.hooks)), call)

    return attention


def _through(hooks: list[AttentionHook], call: AttentionCall) -> AttentionOutput:
    if not hooks:
        return call.proceed()
    return hooks[0](call, lambda: _through(hooks[1:], call))


def _number(value: object, kind: type) -> Any:
    """`value` as `kind` when it is a number (not a bool or None), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return kind(value)
    return None
