"""The attribution benchmark (`python -m rcattr.eval.attribution`): every method side by side on QuoteSum or
Veri-Gran, at their own length or hidden among distractors (`long_context`, `context_length`); its settings
(`config`), methods (`method`, `methods`, the sweep and its recipes), runner,
results and report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr.lazy import lazy_exports

if TYPE_CHECKING:
    from rcattr.eval.attribution.cli import config_from_args, main
    from rcattr.eval.attribution.config import DEFAULT_METHOD_LIMITS, METHODS, PROTOCOL, BenchmarkConfig
    from rcattr.eval.attribution.long_context import LongContext
    from rcattr.eval.attribution.method import AttributionMethod, SpanAttributorMethod
    from rcattr.eval.attribution.methods import default_methods
    from rcattr.eval.attribution.report import markdown_table
    from rcattr.eval.attribution.runner import AttributionBenchmark
    from rcattr.eval.attribution.sweep import SweepMethod, plot_sweep

# imported on first use: `python -m rcattr.eval.attribution` locks its run folder before torch loads
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".cli": ["config_from_args", "main"],
        ".config": ["BenchmarkConfig", "DEFAULT_METHOD_LIMITS", "METHODS", "PROTOCOL"],
        ".long_context": ["LongContext"],
        ".method": ["AttributionMethod", "SpanAttributorMethod"],
        ".methods": ["default_methods"],
        ".report": ["markdown_table"],
        ".runner": ["AttributionBenchmark"],
        ".sweep": ["SweepMethod", "plot_sweep"],
    },
)
