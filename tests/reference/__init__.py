"""Brute-force references the tests compare against: float64 logits and attention (:mod:`.logits`), the
statistics (:mod:`.stats`), RCKVCache's scores and exactness (:mod:`.kv`), the span scorers (:mod:`.spans`)."""

from tests.reference.logits import (
    evicted_reference_logits,
    float64_logits,
    forward_log_probs,
    next_logits,
    record_eager_qk,
)

__all__ = [
    "evicted_reference_logits",
    "float64_logits",
    "forward_log_probs",
    "next_logits",
    "record_eager_qk",
]
