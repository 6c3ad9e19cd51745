"""Baseline attribution methods, with [`RCAttributor`][rcattr.attribution.attributor.RCAttributor]'s interface and result type.

Every class takes `(model, tokenizer, ...)` and offers `attribute(inp, target=None,
granularity=..., output_granularity=...)` returning an [`RCAttributionResult`][rcattr.attribution.result.RCAttributionResult].
[`BASELINES`][rcattr.baselines.BASELINES] holds those built from `(model, tokenizer)` alone; [`AT2Attributor`][rcattr.baselines.at2.AT2Attributor]
also needs a trained estimator. ContextCite and AT2 run through their own packages (`rcattr[peers]`).
"""

from rcattr.baselines.at2 import AT2Attributor
from rcattr.baselines.attention import AttentionAttributor
from rcattr.baselines.bm25 import BM25Attributor
from rcattr.baselines.context_cite import ContextCiteAttributor
from rcattr.baselines.hidden_state import HiddenStateAttributor
from rcattr.baselines.hybrid import HybridAttributor
from rcattr.baselines.integrated_gradients import IntegratedGradientsAttributor
from rcattr.baselines.perturbation import AblationAttributor, KernelShapAttributor, ShapleySamplingAttributor
from rcattr.baselines.random import RandomAttributor

BASELINES = {
    cls.name: cls
    for cls in (
        AttentionAttributor,
        HiddenStateAttributor,
        IntegratedGradientsAttributor,
        BM25Attributor,
        AblationAttributor,
        RandomAttributor,
        HybridAttributor,
        ShapleySamplingAttributor,
        KernelShapAttributor,
        ContextCiteAttributor,
    )
}
"""The baselines built from `(model, tokenizer)` alone, by their `name`: `BASELINES["bm25"](model, tokenizer)`.
Every class of `__all__` but [`AT2Attributor`][rcattr.baselines.at2.AT2Attributor], which also needs a trained estimator."""

__all__ = [
    "BASELINES",
    "AT2Attributor",
    "AblationAttributor",
    "AttentionAttributor",
    "BM25Attributor",
    "ContextCiteAttributor",
    "HiddenStateAttributor",
    "HybridAttributor",
    "IntegratedGradientsAttributor",
    "KernelShapAttributor",
    "RandomAttributor",
    "ShapleySamplingAttributor",
]
