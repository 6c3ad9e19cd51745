"""Capture raw (pre-softmax) attention logits during an ordinary forward or ``generate``.

Inside :class:`LogitCapture` the model's attention implementation is wrapped: the original kernel
(sdpa or eager) still computes every output, and for the chosen query rows the raw logits
f(i, j) = <q_j, k_i> (after RoPE and any q/k norm, unscaled, unmasked, GQA-expanded) are computed
beside it and handed to a reducer, one layer at a time. Nothing of size |s| x |s| per head is kept
unless the reducer keeps it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch
from transformers import PreTrainedModel

from rcattr._compat import WRAPPER_PREFIXES, AttentionFunction, attention_function, base_implementation
from rcattr.routing import route, unroute

__all__ = [
    "SUPPORTED_ATTENTION",
    "CaptureStep",
    "LogitCapture",
    "LogitStore",
    "Reducer",
    "check_supported",
    "mask_allows",
    "visible_keys",
]

SUPPORTED_ATTENTION = ("sdpa", "eager")
_PREFIX = WRAPPER_PREFIXES["capture"]

QueryRows = slice | range | Sequence[int] | torch.Tensor | None


@dataclass(frozen=True)
class CaptureStep:
    """Where the logits of one layer call sit in the sequence.

    Attributes
    ----------
    layer_idx : int
        Decoder layer index.
    query_positions : torch.Tensor
        ``[R]`` sequence positions of the captured query rows.
    key_positions : torch.Tensor
        ``[K]`` sequence positions of the keys the layer holds (a sliding-window cache holds only
        the most recent ones).
    visible : torch.Tensor
        ``[B or 1, R, K]`` bool, True where the model lets the query attend to the key: causality,
        padding and the sliding window, read from the very mask the model used.
    sliding_window : int or None
        The layer's window size when it is a sliding-window layer.
    scaling : float
        The softmax scale the layer applies to the logits (``1/sqrt(head_dim)`` for most models).
    softcap : float or None
        The layer's attention-logit soft-capping, if any (Gemma 2).
    """

    layer_idx: int
    query_positions: torch.Tensor
    key_positions: torch.Tensor
    visible: torch.Tensor
    sliding_window: int | None
    scaling: float
    softcap: float | None = None


Reducer = Callable[[torch.Tensor, CaptureStep], None]
"""Called as ``reducer(logits, step)`` with ``logits`` of shape ``[B, H, R, K]``."""


class LogitCapture:
    """Context manager that delivers raw attention logits of chosen query rows to a reducer.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM whose attention goes through transformers' ``AttentionInterface``
        (Llama, Mistral, Qwen2, Qwen3, Gemma3, Phi3, ...), loaded with sdpa or eager attention.
    reducer : callable
        ``reducer(logits, step)``; ``logits`` is ``[batch, heads, rows, keys]`` in ``dtype``, ``step`` a
        :class:`CaptureStep`. Called once per layer and forward call that has selected rows.
    query_positions : slice, range, sequence of int, tensor or None, default None
        Sequence positions whose query rows are captured (e.g. ``slice(m, None)`` for every token
        after a prompt of length ``m``, including tokens produced by ``generate``). None captures all.
    layers : sequence of int, optional
        Layers to capture; all by default.
    dtype : torch.dtype, optional
        Dtype of the delivered logits; the query's dtype promoted to at least float32 by default.

    Positions are sequence indices, read from the ``position_ids`` the model passes to its attention
    (with left padding, from the row without padding), so a capture that starts on a pre-filled cache
    reports the true positions on every layer, sliding-window layers included. Where a model passes
    none, a pass whose keys are as many as its queries starts at position 0 and later passes continue.

    Examples
    --------
    >>> store = LogitStore()
    >>> with LogitCapture(model, store, query_positions=slice(prompt_len, None)):
    ...     model(input_ids)
    >>> logits, rows = store.layer(0)  # [batch, heads, rows, seq]
    """

    def __init__(
        self,
        model: PreTrainedModel,
        reducer: Reducer,
        query_positions: QueryRows = None,
        *,
        layers: Sequence[int] | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        check_supported(model)
        self.model = model
        self.reducer = reducer
        self.dtype = dtype
        self.layers = None if layers is None else frozenset(int(i) for i in layers)
        self._rows = _RowSelector(query_positions)
        self._modules = {id(m) for m in model.modules()}
        self._next_position: dict[int, int] = {}

    def __enter__(self) -> LogitCapture:
        route(self.model, _PREFIX, _capturing_attention)
        self._next_position.clear()
        _ACTIVE.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            unroute(self.model, _PREFIX)
        finally:
            _ACTIVE.remove(self)

    def _observe(
        self,
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        attention_mask: torch.Tensor | None,
        kwargs: dict[str, object],
    ) -> None:
        layer_idx: int = module.layer_idx  # type: ignore[assignment]  # attention modules set an int
        q_len, k_len = query.shape[-2], key.shape[-2]
        given = kwargs.get("position_ids")
        if isinstance(given, torch.Tensor) and given.shape[-1] == q_len:
            # what the model says; with left padding the row without padding carries the sequence index
            start = int(given.reshape(-1, q_len)[:, 0].max())
        elif k_len == q_len:
            start = 0
        else:  # continuing a cached sequence; first seen with a pre-filled cache: its length
            start = self._next_position.get(layer_idx, k_len - q_len)
        self._next_position[layer_idx] = start + q_len
        if self.layers is not None and layer_idx not in self.layers:
            return
        device = query.device
        positions = torch.arange(start, start + q_len, device=device)
        local_rows = self._rows.select(positions)
        if local_rows.numel() == 0:
            return
        key_positions = torch.arange(start + q_len - k_len, start + q_len, device=device)
        step = CaptureStep(
            layer_idx=layer_idx,
            query_positions=positions[local_rows],
            key_positions=key_positions,
            visible=visible_keys(attention_mask, local_rows, positions[local_rows], key_positions),
            sliding_window=_optional(
                kwargs.get("sliding_window", getattr(module, "sliding_window", None)), int
            ),
            scaling=_optional(kwargs.get("scaling", getattr(module, "scaling", None)), float)
            or query.shape[-1] ** -0.5,
            softcap=_optional(kwargs.get("softcap"), float),
        )
        dtype = self.dtype or torch.promote_types(query.dtype, torch.float32)
        self.reducer(raw_logits(query[:, :, local_rows], key, dtype=dtype), step)


def raw_logits(query: torch.Tensor, key: torch.Tensor, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Unscaled logits ``<q, k>`` with grouped-query heads expanded.

    Parameters
    ----------
    query : torch.Tensor
        ``[B, H, R, d]``.
    key : torch.Tensor
        ``[B, H_kv, K, d]``; query head h reads key head ``h // (H / H_kv)``.

    Returns
    -------
    torch.Tensor
        ``[B, H, R, K]`` in ``dtype``.
    """
    batch, heads, rows, dim = query.shape
    kv_heads = key.shape[1]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads cannot share {kv_heads} key heads evenly")
    grouped = query.to(dtype).reshape(batch, kv_heads, heads // kv_heads, rows, dim)
    logits = grouped @ key.to(dtype)[:, :, None].transpose(-1, -2)
    return logits.reshape(batch, heads, rows, key.shape[-2])


class LogitStore:
    """A reducer that keeps every captured logit, for tests, inspection and small inputs.

    Memory is O(layers x batch x heads x rows x seq): capture only the rows you need.
    """

    def __init__(self) -> None:
        self.steps: dict[int, list[tuple[torch.Tensor, CaptureStep]]] = defaultdict(list)

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        self.steps[step.layer_idx].append((logits, step))

    def layer(self, layer_idx: int, fill: float = float("nan")) -> tuple[torch.Tensor, torch.Tensor]:
        """Dense logits of one layer over all its captured rows.

        Returns
        -------
        logits : torch.Tensor
            ``[B, H, R, S]``: row r holds query position ``positions[r]``, column i key position i;
            keys the query cannot see (or that the layer no longer held) are ``fill``.
        positions : torch.Tensor
            ``[R]`` query positions.
        """
        if layer_idx not in self.steps:
            raise KeyError(f"layer {layer_idx} was not captured; captured: {sorted(self.steps)}")
        steps = self.steps[layer_idx]
        positions = torch.cat([step.query_positions for _, step in steps])
        seq_len = int(max(step.key_positions.max() for _, step in steps)) + 1
        batch, heads = steps[0][0].shape[:2]
        out = steps[0][0].new_full((batch, heads, len(positions), seq_len), fill)
        row = 0
        for logits, step in steps:
            rows = logits.shape[-2]
            block = torch.where(step.visible[:, None], logits, torch.full_like(logits, fill))
            out[:, :, row : row + rows, step.key_positions] = block
            row += rows
        return out, positions

    def stacked(self, fill: float = float("nan")) -> torch.Tensor:
        """All captured layers as one ``[L, B, H, R, S]`` tensor (layers in increasing order)."""
        return torch.stack([self.layer(i, fill)[0] for i in sorted(self.steps)])


class _RowSelector:
    """Which query positions to capture, in a form cheap to test per forward call."""

    def __init__(self, spec: QueryRows) -> None:
        self.start, self.stop, self.explicit = 0, None, None
        if spec is None:
            return
        if isinstance(spec, (slice, range)):
            if spec.step not in (None, 1):
                raise ValueError(f"query_positions must have step 1, got {spec!r}")
            if (spec.start or 0) < 0 or (spec.stop is not None and spec.stop < 0):
                raise ValueError(f"query_positions must be non-negative positions, got {spec!r}")
            self.start, self.stop = spec.start or 0, spec.stop
            return
        explicit = torch.as_tensor(spec, dtype=torch.long).flatten()
        if explicit.numel() and int(explicit.min()) < 0:
            raise ValueError(f"query_positions must be non-negative, got {explicit.tolist()}")
        self.explicit = explicit

    def select(self, positions: torch.Tensor) -> torch.Tensor:
        """Indices into ``positions`` ([q]) of the selected ones."""
        if self.explicit is not None:
            keep = torch.isin(positions, self.explicit.to(positions.device))
        else:
            keep = positions >= self.start
            if self.stop is not None:
                keep &= positions < self.stop
        return keep.nonzero().flatten()


def visible_keys(
    attention_mask: torch.Tensor | None,
    local_rows: torch.Tensor,
    query_positions: torch.Tensor,
    key_positions: torch.Tensor,
) -> torch.Tensor:
    """``[B or 1, R, K]`` bool: which keys the chosen query rows attend to, as the model decided.

    ``attention_mask`` is the 4-D mask the attention function received (None when the kernel applies
    plain causality), ``local_rows`` ``[R]`` index its query rows, ``query_positions`` ``[R]`` and
    ``key_positions`` ``[K]`` are the sequence positions of those rows and of the keys.
    """
    if attention_mask is None:  # the kernel applied plain causality (is_causal)
        return (key_positions[None, :] <= query_positions[:, None])[None]
    if attention_mask.dim() != 4 or attention_mask.shape[-1] != key_positions.numel():
        raise NotImplementedError(
            f"unexpected attention mask of shape {tuple(attention_mask.shape)} for "
            f"{key_positions.numel()} keys; only 4-D [batch, 1, queries, keys] masks are supported"
        )
    return mask_allows(attention_mask[:, 0, local_rows])


def mask_allows(attention_mask: torch.Tensor) -> torch.Tensor:
    """A model's attention mask as bool (True attends): sdpa's bool masks as they are, eager's additive
    float masks (0 attends, the dtype's minimum blocks) thresholded."""
    if attention_mask.dtype == torch.bool:
        return attention_mask
    return attention_mask > torch.finfo(attention_mask.dtype).min / 2


_ACTIVE: list[LogitCapture] = []


def _owner(module: torch.nn.Module) -> LogitCapture | None:
    for capture in reversed(_ACTIVE):
        if id(module) in capture._modules:
            return capture
    return None


def _capturing_attention(inner_name: str) -> AttentionFunction:
    """An attention function that runs ``inner_name`` and shows its inputs to the active capture."""

    def attention(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        *args: object,  # transformers passes the rest by keyword; kvpress's patch passes dropout by position
        **kwargs: object,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        capture = _owner(module)
        if capture is not None:
            capture._observe(module, query, key, attention_mask, kwargs)
        return attention_function(inner_name, module)(
            module, query, key, value, attention_mask, *args, **kwargs
        )

    return attention


def _optional(value: object, kind: type) -> Any:
    """``value`` as ``kind`` when it is a number (not a bool or None), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return kind(value)
    return None


def check_supported(model: PreTrainedModel) -> None:
    """Raise ``NotImplementedError`` naming the reason if logits of ``model`` cannot be captured."""
    name = type(model).__name__
    if getattr(model.config, "is_encoder_decoder", False):
        raise NotImplementedError(
            f"{name} is an encoder-decoder model; rcattr captures decoder-only causal LMs"
        )
    if not getattr(model, "_supports_attention_backend", False):
        raise NotImplementedError(
            f"{name} does not route its attention through transformers' AttentionInterface, so its "
            "query/key logits cannot be captured. Supported: decoder-only models that do "
            "(tested: Llama, Mistral, Qwen2, Qwen3, Gemma3, Phi3)."
        )
    implementation = model.config._attn_implementation
    if base_implementation(implementation) not in SUPPORTED_ATTENTION:
        raise NotImplementedError(
            f"{name} uses attn_implementation={implementation!r}; logit capture supports "
            f"{list(SUPPORTED_ATTENTION)}. Reload with attn_implementation='sdpa'."
        )
