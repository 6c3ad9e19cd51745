"""The long-generation benchmark (`python -m rcattr.eval.kv_long`): decode-time eviction against kvpress's
decoding presses at one token budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr.lazy import lazy_exports

if TYPE_CHECKING:
    from rcattr.eval.kv_long.cli import main
    from rcattr.eval.kv_long.config import DecodeBudget, LongBenchmarkConfig
    from rcattr.eval.kv_long.runner import LongGenerationBenchmark

# imported on first use: `python -m rcattr.eval.kv_long` locks its run folder before torch loads
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".cli": ["main"],
        ".config": ["DecodeBudget", "LongBenchmarkConfig"],
        ".runner": ["LongGenerationBenchmark"],
    },
)
