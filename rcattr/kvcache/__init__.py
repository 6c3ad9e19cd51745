"""Head-wise KV-cache eviction by relative contextualization: :class:`RCKVCache` (docs/design.md §3)."""

from rcattr.kvcache.cache import RCKVCache, cache_nbytes
from rcattr.kvcache.layer import Eviction, EvictionPolicy, RCLayer, WindowScores
from rcattr.kvcache.scoring import (
    adaptive_keep,
    fixed_ratio_keep,
    leading_tokens,
    value_weighted,
    window_rc_scores,
)

__all__ = [
    "Eviction",
    "RCPress",
    "EvictionPolicy",
    "RCKVCache",
    "RCLayer",
    "WindowScores",
    "adaptive_keep",
    "cache_nbytes",
    "fixed_ratio_keep",
    "leading_tokens",
    "value_weighted",
    "window_rc_scores",
]


def __getattr__(name: str) -> object:
    """:class:`RCPress` on first use: it needs kvpress, installed where kvpress runs (transformers < 5.3)."""
    if name != "RCPress":
        raise AttributeError(f"module 'rcattr.kvcache' has no attribute {name!r}")
    try:
        from rcattr.kvcache.press import RCPress
    except ImportError as error:
        if not (error.name or "").startswith("kvpress"):
            raise
        raise ImportError(
            "RCPress is a kvpress press and needs kvpress: pip install kvpress (it pins transformers < 5.3; "
            "in this checkout, `make setup-kvpress` builds .venv-kvpress)"
        ) from error
    return RCPress
