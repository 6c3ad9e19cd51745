"""The long-generation benchmark (``python -m rcattr.eval.kv_long``): decode-time eviction against kvpress's
decoding presses at one token budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr._lazy import lazy_exports

__all__ = ["LongBenchmarkConfig", "LongGenerationBenchmark", "main"]

if TYPE_CHECKING:
    from rcattr.eval.kv_long.cli import (
        LongBenchmarkConfig,
        LongGenerationBenchmark,
        main,
    )

# imported on first use: `python -m rcattr.eval.kv_long` checks its run folder before torch loads
__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "rcattr.eval.kv_long.cli"))
