"""Capture raw (pre-softmax) attention logits during an ordinary forward or `generate`.

Inside [`LogitCapture`][rcattr.runtime.capture.LogitCapture] the model's attention goes through rcattr's attention layer
([`rcattr.runtime.attention`][rcattr.runtime.attention]): the model's own kernel (sdpa, eager or flex attention) still computes
every output, and for the chosen query rows the raw logits
f(i, j) = <q_j, k_i> (after RoPE and any q/k norm, unscaled, unmasked, GQA-expanded) are computed
beside it and handed to a reducer, one layer at a time. Nothing of size |s| x |s| per head is kept
unless the reducer keeps it.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

import torch
from transformers import PreTrainedModel

from rcattr.runtime.attention import AttentionCall, AttentionOutput, attach, check_supported, detach

__all__ = [
    "CaptureStep",
    "LogitCapture",
    "LogitStore",
    "Reducer",
    "raw_logits",
]

QueryRows = slice | range | Sequence[int] | torch.Tensor | None


@dataclass(frozen=True)
class CaptureStep:
    """Where the logits of one layer call sit in the sequence.

    Attributes
    ----------
    layer_idx : int
        Decoder layer index.
    query_positions : torch.Tensor
        `[R]` sequence positions of the captured query rows.
    key_positions : torch.Tensor
        `[K]` sequence positions of the keys the layer holds (a sliding-window cache holds only
        the most recent ones).
    visible : torch.Tensor
        `[B or 1, R, K]` bool, True where the model lets the query attend to the key: causality,
        padding and the sliding window ([`rcattr.runtime.attention.AttentionCall.visible`][rcattr.runtime.attention.AttentionCall.visible]).
    sliding_window : int or None
        The layer's window size when it is a sliding-window layer.
    scaling : float
        The softmax scale the layer applies to the logits (`1/sqrt(head_dim)` for most models).
    softcap : float or None
        The layer's attention-logit soft-capping, if any (Gemma 2).
    query : torch.Tensor or None
        `[B, H, R, d]` the captured rows' queries (after RoPE and any norm) the logits come from.
    key : torch.Tensor or None
        `[B, H_kv, K, d]` the keys they come from: `raw_logits(query, key)` recomputes the logits,
        e.g. of a few heads after the pass, without keeping every head's.
    """

    layer_idx: int
    query_positions: torch.Tensor
    key_positions: torch.Tensor
    visible: torch.Tensor
    sliding_window: int | None
    scaling: float
    softcap: float | None = None
    query: torch.Tensor | None = None
    key: torch.Tensor | None = None

    def row(self, index: int, rows: slice, keys: slice) -> CaptureStep:
        """Batch row `index` alone, its query rows `rows` and keys `keys` (slices of this step's), with
        positions counted from the first key kept: a left-padded row without its padding, as its own
        pass gives it (the logits to go with it: `logits[index : index + 1, :, rows, keys]`)."""
        key_positions = self.key_positions[keys]
        shift = key_positions[:1]
        own = index if len(self.visible) > 1 else 0  # [1, R, K]: the same for every row
        return dataclasses.replace(
            self,
            query_positions=self.query_positions[rows] - shift,
            key_positions=key_positions - shift,
            visible=self.visible[own : own + 1, rows, keys],
            query=None if self.query is None else self.query[index : index + 1, :, rows],
            key=None if self.key is None else self.key[index : index + 1, :, keys],
        )


Reducer = Callable[[torch.Tensor, CaptureStep], None]
"""Called as `reducer(logits, step)` with `logits` of shape `[B, H, R, K]`."""


class LogitCapture:
    """Context manager that delivers raw attention logits of chosen query rows to a reducer.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM whose attention goes through transformers' `AttentionInterface`
        (Llama, Mistral, Qwen2, Qwen3, Gemma3, Phi3, ...), with sdpa, eager or flex attention.
    reducer : callable
        `reducer(logits, step)`; `logits` is `[batch, heads, rows, keys]` in `dtype`, `step` a
        [`CaptureStep`][rcattr.runtime.capture.CaptureStep]. Called once per layer and forward call that has selected rows.
    query_positions : slice, range, sequence of int, tensor or None, default None
        Sequence positions whose query rows are captured (e.g. `slice(m, None)` for every token
        after a prompt of length `m`, including tokens produced by `generate`). None captures all.
    layers : sequence of int, optional
        Layers to capture; all by default.
    dtype : torch.dtype, optional
        Dtype of the delivered logits; the query's dtype promoted to at least float32 by default.

    Notes
    -----
    Positions are sequence indices, read from the `position_ids` the model passes to its attention
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

    def __enter__(self) -> LogitCapture:
        attach(self.model, self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        detach(self.model, self)

    def __call__(self, call: AttentionCall, proceed: Callable[[], AttentionOutput]) -> AttentionOutput:
        """The attention hook: hand the chosen rows' logits of `call` to the reducer, then run the kernel."""
        self._observe(call)
        return proceed()

    def _observe(self, call: AttentionCall) -> None:
        layer_idx = call.layer_idx
        positions = call.query_positions  # read even for layers not captured: it tracks where passes end
        if self.layers is not None and layer_idx not in self.layers:
            return
        local_rows = self._rows.select(call.start, positions)
        if local_rows.numel() == 0:
            return
        query = call.query[:, :, local_rows]
        step = CaptureStep(
            layer_idx=layer_idx,
            query_positions=positions[local_rows],
            key_positions=call.key_positions,
            visible=call.visible(local_rows),
            sliding_window=call.sliding_window,
            scaling=call.scaling,
            softcap=call.softcap,
            query=query,
            key=call.key,
        )
        dtype = self.dtype or torch.promote_types(query.dtype, torch.float32)
        self.reducer(raw_logits(query, call.key, dtype=dtype), step)


def raw_logits(query: torch.Tensor, key: torch.Tensor, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Unscaled logits `<q, k>` with grouped-query heads expanded.

    Parameters
    ----------
    query : torch.Tensor
        `[B, H, R, d]`.
    key : torch.Tensor
        `[B, H_kv, K, d]`; query head h reads key head `h // (H / H_kv)`.

    Returns
    -------
    torch.Tensor
        `[B, H, R, K]` in `dtype`.
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
        # the logits are kept; the queries and keys are not (during generate, every step's keys)
        self.steps[step.layer_idx].append((logits, dataclasses.replace(step, query=None, key=None)))

    def layer(self, layer_idx: int, fill: float = float("nan")) -> tuple[torch.Tensor, torch.Tensor]:
        """Dense logits of one layer over all its captured rows.

        Returns
        -------
        logits : torch.Tensor
            `[B, H, R, S]`: row r holds query position `positions[r]`, column i key position i;
            keys the query cannot see (or that the layer no longer held) are `fill`.
        positions : torch.Tensor
            `[R]` query positions.
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

    def select(self, start: int, positions: torch.Tensor) -> torch.Tensor:
        """Indices into `positions` ([q], the call's query positions from `start` on) of the selected ones.
        A range is cut on the host, so that no read from the model's device waits for its queue."""
        if self.explicit is not None:
            keep = torch.isin(positions, self.explicit.to(positions.device))
            return keep.nonzero().flatten()
        end = start + len(positions)
        first = min(max(self.start, start), end)
        last = end if self.stop is None else min(max(self.stop, first), end)
        return torch.arange(first - start, last - start, device=positions.device)
