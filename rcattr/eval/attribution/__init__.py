"""The attribution benchmark (``python -m rcattr.eval.attribution``): every method side by side on QuoteSum or
Veri-Gran; its settings (``config``), methods (``method``, ``methods``, the sweep and its recipes), runner,
results and report.
"""

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
