"""RC scores as a kvpress press: [`RCPress`][rcattr.kvcache.press.RCPress], for kvpress's own pipeline and `with press(model):`.

kvpress presses evict a fixed share of every key head's prompt (`compression_ratio`). RCPress scores
each prompt key as [`RCKVCache`][rcattr.kvcache.cache.RCKVCache] does, by its expected RC against the last
`window` prompt queries (times the norm of its value), and keeps the best-scoring keys of every head;
the window and the first `sinks` tokens are always kept. The window's queries are recomputed from
the layer's hidden states, as kvpress's SnapKV does. This module imports kvpress: install it where
kvpress runs (it pins transformers < 5.3; `make setup-kvpress`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from kvpress import ScorerPress
from kvpress.utils import get_prerope_query_states
from torch import nn

from rcattr.kvcache.cache import RCKVCache
from rcattr.kvcache.scoring import WindowScorer
from rcattr.runtime.capture import raw_logits

__all__ = ["RCPress"]


@dataclass
class RCPress(ScorerPress):
    """Relative contextualization (RCStat) as a kvpress `ScorerPress`: evict `compression_ratio` of
    every key head's prompt, lowest expected RC against the prompt's last `window` queries first.

    The score of a key before the window is [`RCKVCache`][rcattr.kvcache.cache.RCKVCache]'s, by the same
    [`WindowScorer`][rcattr.kvcache.scoring.WindowScorer] (docs/design.md §3): `E[max(X(i, ĝ) - Y(ĝ, ĝ), 0)]` over the
    window ĝ's raw logits, averaged over the query heads of each key head, times the norm of the key's
    value. kvpress then keeps `int(n · (1 - compression_ratio))` of the `n` prompt entries of every key
    head, the window and the sinks among them: `RCPress(r, scorer=s)` keeps what
    `RCKVCache(model, policy=EvictionPolicy(Ratio(r, scope="head"), s))` keeps.
    Unlike RCKVCache it cannot give heads different budgets, evict in later turns of a chat, or run
    outside kvpress's transformers line. Paper: RCStat, arXiv 2506.19549.

    Parameters
    ----------
    compression_ratio : float, default 0.0
        Share of each key head's prompt entries to evict, in [0, 1) (0 leaves the cache as it is).
    window : int, default 16
        The last prompt tokens whose queries score the rest (always kept), >= 1; a prompt must be longer
        than `window + scorer.sinks`.
    scorer : WindowScorer, default WindowScorer()
        The statistic, the value norm and the sinks (the first prompt tokens, always kept).

    Examples
    --------
    >>> from transformers import pipeline
    >>> pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer)  # after import kvpress
    >>> pipe(context, question=question, press=RCPress(compression_ratio=0.5))["answer"]
    >>> with RCPress(compression_ratio=0.5)(model):
    ...     model.generate(**inputs, max_new_tokens=32)
    """

    compression_ratio: float = 0.0
    window: int = 16
    scorer: WindowScorer = field(default_factory=WindowScorer)

    def __post_init__(self) -> None:
        ratio = self.compression_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio < 1:
            raise ValueError(f"compression_ratio must be a number in [0, 1), got {ratio!r}")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"window must be an int >= 1, got {self.window!r}")
        if not isinstance(self.scorer, WindowScorer):
            raise ValueError(f"scorer must be a WindowScorer, got {self.scorer!r}")

    def score(
        self,
        module: nn.Module,
        hidden_states: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        attentions: torch.Tensor | None,
        kwargs: dict[str, Any],
    ) -> torch.Tensor:
        """RC score of every prompt key against the prompt's last `window` queries.

        Parameters
        ----------
        module : nn.Module
            The attention layer (its `q_proj`, q-norm and `head_dim` rebuild the window's queries).
        hidden_states : torch.Tensor
            `[B, n, hidden]` the layer's input for the prompt.
        keys, values : torch.Tensor
            `[B, Hkv, n, d]` the prompt's keys (after RoPE) and values.
        attentions : torch.Tensor or None
            Unused: RC needs raw logits, not attention weights.
        kwargs : dict
            The attention layer's keyword arguments; `position_embeddings` is the `(cos, sin)` pair,
            each `[B, n, rotary_dim]`.

        Returns
        -------
        torch.Tensor
            `[B, Hkv, n]` float32 scores: RC (>= 0) before the window, `inf` for the window and the
            first `scorer.sinks` tokens so that they are always kept.

        Raises
        ------
        ValueError
            When the prompt has no more than `window + scorer.sinks` tokens (as kvpress's SnapKV refuses
            a prompt no longer than its window).
        TypeError
            When the cache is an [`RCKVCache`][rcattr.kvcache.cache.RCKVCache], which evicts by itself.
        """
        if isinstance(kwargs.get("past_key_values"), RCKVCache):
            raise TypeError(
                "RCPress cannot compress an RCKVCache: RCKVCache already evicts by the same scores; "
                "use one or the other (RCPress with a DynamicCache, or RCKVCache without a press)"
            )
        sinks, prompt = self.scorer.sinks, hidden_states.shape[1]
        if prompt <= self.window + sinks:  # nothing left to score: kvpress would evict an arbitrary share
            raise ValueError(
                f"RCPress(window={self.window}) with {sinks} sinks needs a context longer than "
                f"{self.window + sinks} tokens, got {prompt}: lower window or give a longer context"
            )
        batch, kv_heads, n, _ = keys.shape  # n < prompt in a sliding-window layer
        window = min(self.window, n)
        scores = keys.new_full((batch, kv_heads, n), float("inf"), dtype=torch.float32)
        if n <= window:  # a sliding layer's cache no longer than the window
            return scores
        query = get_prerope_query_states(module, hidden_states[:, -window:])  # [B, H, w, d]
        cos, sin = (part[:, -window:].unsqueeze(1) for part in kwargs["position_embeddings"])
        query = _apply_rope(query, cos.to(query.dtype), sin.to(query.dtype))
        positions = torch.arange(n, device=keys.device)
        visible = positions[None, :] <= positions[n - window :, None]  # [w, n] causality
        logits = raw_logits(query, keys, dtype=self.scorer.dtype)
        before = self.scorer(logits, visible.expand(batch, window, n), values)  # [B, Hkv, n - w]
        scores[..., sinks : n - window] = before[..., sinks:]
        return scores


def _apply_rope(query: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE of `query [B, H, w, d]` with `cos, sin [B, 1, w, r]`, rotating the first `r <= d` dims
    (all of them but in Phi-3-style partial rotary models), as the models' `apply_rotary_pos_emb` do."""
    rotary = cos.shape[-1]
    rotated, passed = query[..., :rotary], query[..., rotary:]
    half = rotary // 2
    rotate_half = torch.cat((-rotated[..., half:], rotated[..., :half]), dim=-1)
    return torch.cat((rotated * cos + rotate_half * sin, passed), dim=-1)
