"""RC scores as a kvpress press: :class:`RCPress`, for kvpress's own pipeline and ``with press(model):``.

kvpress presses evict a fixed share of every key head's prompt (``compression_ratio``). RCPress scores
each prompt key as :class:`~rcattr.kvcache.RCKVCache` does, by its expected RC against the last
``window`` prompt queries (times the norm of its value), and keeps the best-scoring keys of every head;
the window and the first ``sinks`` tokens are always kept. The window's queries are recomputed from
the layer's hidden states, as kvpress's SnapKV does. This module imports kvpress: install it where
kvpress runs (it pins transformers < 5.3; ``make setup-kvpress``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from kvpress import ScorerPress
from kvpress.utils import get_prerope_query_states
from torch import nn
from transformers.models.llama.modeling_llama import rotate_half

from rcattr.capture import raw_logits
from rcattr.kvcache.scoring import GroupReduce, Statistic, value_weighted, window_rc_scores

__all__ = ["RCPress"]


@dataclass
class RCPress(ScorerPress):
    """Relative contextualization (RCStat) as a kvpress ``ScorerPress``: evict ``compression_ratio`` of
    every key head's prompt, lowest expected RC against the prompt's last ``window`` queries first.

    Parameters
    ----------
    compression_ratio : float, default 0.0
        Share of each key head's prompt entries to evict, in [0, 1).
    window : int, default 16
        The last prompt tokens whose queries score the rest (kept, like the sinks).
    value_norm : bool, default True
        Multiply each score by the norm of the key's value vector.
    sinks : int, default 4
        The first prompt tokens, always kept.
    group_reduce : {"mean", "max"}, default "mean"
        How a key head aggregates the scores of its query heads.
    statistic : {"expected", "upper_bound"}, default "expected"
        Expected RC, or the paper's coupling-free upper bound of it.

    Examples
    --------
    >>> from kvpress import KVPressTextGenerationPipeline
    >>> pipe = KVPressTextGenerationPipeline(model=model, tokenizer=tokenizer)
    >>> pipe(context, question=question, press=RCPress(compression_ratio=0.5))["answer"]
    """

    compression_ratio: float = 0.0
    window: int = 16
    value_norm: bool = True
    sinks: int = 4
    group_reduce: GroupReduce = "mean"
    statistic: Statistic = "expected"

    def __post_init__(self) -> None:
        ratio = self.compression_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio < 1:
            raise ValueError(f"compression_ratio must be in [0, 1), got {ratio!r}")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"window must be an int >= 1, got {self.window!r}")
        if isinstance(self.sinks, bool) or not isinstance(self.sinks, int) or self.sinks < 0:
            raise ValueError(f"sinks must be an int >= 0, got {self.sinks!r}")
        if not isinstance(self.value_norm, bool):
            raise ValueError(f"value_norm must be True or False, got {self.value_norm!r}")
        if self.group_reduce not in ("mean", "max"):
            raise ValueError(f"group_reduce must be 'mean' or 'max', got {self.group_reduce!r}")
        if self.statistic not in ("expected", "upper_bound"):
            raise ValueError(f"statistic must be 'expected' or 'upper_bound', got {self.statistic!r}")

    def score(
        self,
        module: nn.Module,
        hidden_states: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        attentions: torch.Tensor | None,
        kwargs: dict[str, Any],
    ) -> torch.Tensor:
        """``[B, Hkv, n]`` scores of the prompt's ``keys [B, Hkv, n, d]``: RC against the window, ``inf``
        for the window and the sinks (always kept)."""
        batch, kv_heads, n, _ = keys.shape
        window = min(self.window, n)
        query = get_prerope_query_states(module, hidden_states[:, -window:])  # [B, H, w, d]
        cos, sin = (part[:, -window:].unsqueeze(1) for part in kwargs["position_embeddings"])
        query = query * cos + rotate_half(query) * sin
        positions = torch.arange(n, device=keys.device)
        visible = (positions[None, :] <= positions[n - window :, None])[None].expand(batch, window, n)
        scores = keys.new_full((batch, kv_heads, n), float("inf"), dtype=torch.float32)
        if n > window:
            before = window_rc_scores(
                raw_logits(query, keys),
                visible,
                kv_heads,
                group_reduce=self.group_reduce,
                statistic=self.statistic,
            )
            if self.value_norm:
                before = value_weighted(before, values)
            scores[..., self.sinks : n - window] = before[..., self.sinks :]
        return scores
