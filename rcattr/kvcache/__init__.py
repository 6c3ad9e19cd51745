"""Head-wise KV-cache eviction by relative contextualization: :class:`RCKVCache` (DESIGN §3)."""

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
