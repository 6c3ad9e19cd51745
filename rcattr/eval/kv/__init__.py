"""The KV-compression benchmark (`python -m rcattr.eval.kv`): RCKVCache against kvpress's presses on SQuAD v2,
QMSum and needles; its settings, data, methods and registry, protocol, metrics, runner, tables and plots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr.lazy import lazy_exports

if TYPE_CHECKING:
    from rcattr.eval.kv.cli import main
    from rcattr.eval.kv.config import (
        DEFAULT_MAX_NEW_TOKENS,
        INSTRUCTIONS,
        METHODS,
        PROTOCOL,
        QUALITY,
        RESUMABLE_CHANGES,
        KVBenchmarkConfig,
        load_records,
    )
    from rcattr.eval.kv.registry import PressFamily, RCFamily, default_kv_methods
    from rcattr.eval.kv.runner import KVBenchmark

# imported on first use: `python -m rcattr.eval.kv` locks its run folder before torch loads
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".cli": ["main"],
        ".config": [
            "DEFAULT_MAX_NEW_TOKENS",
            "INSTRUCTIONS",
            "KVBenchmarkConfig",
            "METHODS",
            "PROTOCOL",
            "QUALITY",
            "RESUMABLE_CHANGES",
            "load_records",
        ],
        ".registry": ["PressFamily", "RCFamily", "default_kv_methods"],
        ".runner": ["KVBenchmark"],
    },
)
