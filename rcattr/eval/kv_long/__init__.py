"""The long-generation benchmark (``python -m rcattr.eval.kv_long``): decode-time eviction against kvpress's
decoding presses at one token budget.
"""

from rcattr.eval.kv_long.cli import (
    LongBenchmarkConfig,
    LongGenerationBenchmark,
    main,
)

__all__ = ["LongBenchmarkConfig", "LongGenerationBenchmark", "main"]
