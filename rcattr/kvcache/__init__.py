"""Head-wise KV-cache eviction by relative contextualization: [`RCKVCache`][rcattr.kvcache.cache.RCKVCache] (docs/design.md §3)."""

from rcattr.kvcache.cache import RCKVCache, cache_nbytes
from rcattr.kvcache.context import CompressedContext, SplitPrompt, compress_context, split_prompt
from rcattr.kvcache.distilled import DistilledScorer, ScorePredictor
from rcattr.kvcache.layer import RCLayer
from rcattr.kvcache.policy import (
    DEFAULT_RATIO,
    DecodeEviction,
    EvictionPolicy,
    Ratio,
    Rule,
    Threshold,
    TokenBudget,
)
from rcattr.kvcache.prefill import DEFAULT_PREFILL_CHUNK, chunked_prefill
from rcattr.kvcache.scoring import (
    WindowScorer,
    adaptive_keep,
    budget_keep,
    fixed_ratio_keep,
    leading_tokens,
    value_weighted,
    window_rc_scores,
)
from rcattr.kvcache.state import DecodeRecord, Eviction, LayerState
from rcattr.runtime.compat import cache_argument

# RCPress is not in __all__: it needs kvpress, and `from rcattr.kvcache import *` must work without it
__all__ = [
    "DEFAULT_PREFILL_CHUNK",
    "DEFAULT_RATIO",
    "CompressedContext",
    "DecodeEviction",
    "DecodeRecord",
    "DistilledScorer",
    "Eviction",
    "EvictionPolicy",
    "LayerState",
    "RCKVCache",
    "RCLayer",
    "Ratio",
    "Rule",
    "ScorePredictor",
    "SplitPrompt",
    "Threshold",
    "TokenBudget",
    "WindowScorer",
    "adaptive_keep",
    "budget_keep",
    "cache_argument",
    "cache_nbytes",
    "chunked_prefill",
    "compress_context",
    "fixed_ratio_keep",
    "leading_tokens",
    "split_prompt",
    "value_weighted",
    "window_rc_scores",
]


def __getattr__(name: str) -> object:
    """`RCPress` on first use (PEP 562): it imports kvpress, which pins transformers < 5.3."""
    if name != "RCPress":
        raise AttributeError(f"module 'rcattr.kvcache' has no attribute {name!r}")
    try:
        from rcattr.kvcache.press import RCPress
    except ImportError as error:
        if not (error.name or "").startswith("kvpress"):
            raise
        raise ImportError(
            "RCPress needs kvpress: pip install 'rcattr[kvpress]' (kvpress pins transformers < 5.3, so "
            "transformers>=5.2,<5.3; in this checkout, `make setup-kvpress` builds .venv-kvpress)"
        ) from error
    return RCPress


def __dir__() -> list[str]:
    return sorted([*globals(), "RCPress"])
