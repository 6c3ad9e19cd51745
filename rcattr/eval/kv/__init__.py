"""The KV-compression benchmark (``python -m rcattr.eval.kv``): RCKVCache against kvpress's presses on SQuAD v2,
QMSum and needles; its settings, data, methods and registry, protocol, metrics, runner, tables and plots.
"""

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
