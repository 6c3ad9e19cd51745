"""The attribution benchmark (``python -m rcattr.eval.attribution``): every method side by side on QuoteSum or
Veri-Gran; its settings (``config``), methods (``method``, ``methods``, the sweep and its recipes), runner,
results and report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr._lazy import lazy_exports

__all__ = [
    "DEFAULT_METHOD_LIMITS",
    "METHODS",
    "PROTOCOL",
    "AttributionBenchmark",
    "AttributionMethod",
    "BenchmarkConfig",
    "SpanAttributorMethod",
    "SweepMethod",
    "config_from_args",
    "default_methods",
    "main",
    "markdown_table",
    "plot_sweep",
]

if TYPE_CHECKING:
    from rcattr.eval.attribution.cli import (
        DEFAULT_METHOD_LIMITS,
        METHODS,
        PROTOCOL,
        AttributionBenchmark,
        AttributionMethod,
        BenchmarkConfig,
        SpanAttributorMethod,
        SweepMethod,
        config_from_args,
        default_methods,
        main,
        markdown_table,
        plot_sweep,
    )

# imported on first use: `python -m rcattr.eval.attribution` checks its run folder before torch loads
__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "rcattr.eval.attribution.cli"))
