"""Baseline attribution methods, with :class:`~rcattr.RCAttributor`'s interface and result type.

Every class takes ``(model, tokenizer, ...)`` and offers ``attribute(inp, target=None,
granularity=..., output_granularity=...)`` returning an :class:`~rcattr.RCAttributionResult`.
"""

from rcattr.baselines.ablation import AblationAttributor
from rcattr.baselines.attention import AttentionAttributor
from rcattr.baselines.bm25 import BM25Attributor
from rcattr.baselines.hidden_state import HiddenStateAttributor
from rcattr.baselines.hybrid import HybridAttributor
from rcattr.baselines.integrated_gradients import IntegratedGradientsAttributor
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
    )
}

__all__ = [
    "BASELINES",
    "AblationAttributor",
    "AttentionAttributor",
    "BM25Attributor",
    "HiddenStateAttributor",
    "HybridAttributor",
    "IntegratedGradientsAttributor",
    "RandomAttributor",
]
