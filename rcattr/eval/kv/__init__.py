"""The KV-compression benchmark (``python -m rcattr.eval.kv``): RCKVCache against kvpress's presses on SQuAD v2,
QMSum and needles; its settings, data, methods and registry, protocol, metrics, runner, tables and plots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr._lazy import lazy_exports

__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "INSTRUCTIONS",
    "METHODS",
    "PROTOCOL",
    "QUALITY",
    "RESUMABLE_CHANGES",
    "KVBenchmark",
    "KVBenchmarkConfig",
    "PressFamily",
    "RCFamily",
    "default_kv_methods",
    "load_records",
    "main",
]

if TYPE_CHECKING:
    from rcattr.eval.kv.cli import (
        DEFAULT_MAX_NEW_TOKENS,
        INSTRUCTIONS,
        METHODS,
        PROTOCOL,
        QUALITY,
        RESUMABLE_CHANGES,
        KVBenchmark,
        KVBenchmarkConfig,
        PressFamily,
        RCFamily,
        default_kv_methods,
        load_records,
        main,
    )

# imported on first use: `python -m rcattr.eval.kv` checks its run folder before torch loads
__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "rcattr.eval.kv.cli"))
