"""Reference logits for exactness tests: q and k recorded from an eager run, recomputed in float64."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch


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
