"""Freed memory handed back to the operating system as a compressing cache goes, so that evicting lowers the
process's peak rather than leaving holes in the C heap.

glibc keeps freed blocks of its heap for reuse. A prefill that interleaves what the cache keeps (every layer's
keys and values) with what scoring needs for a moment (the window's logits, the kept entries re-packed) leaves
holes that the next layer's larger blocks do not fit, so the resident memory grows past what is alive: on the
default model at 8k tokens, one forward through an RCKVCache grew the process about 0.24 GB more than a
DynamicCache's while the live tensors differed by a few MB (docs/benchmarks/speed-memory.md, "Peak memory of one forward").
`malloc_trim(0)` returns every free page of the heap; elsewhere (macOS, musl) nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

__all__ = ["release_freed_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None


def release_freed_memory() -> None:
    """Return the C heap's free pages to the operating system (glibc's `malloc_trim(0)`; a no-op elsewhere)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
