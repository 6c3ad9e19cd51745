"""The methods and settings the generic tests run over, in one table (as kvpress's tests/default_presses.py):
attributors and their span scorers, the baselines with the options that keep them fast, and RCKVCache's
eviction policies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.base import SpanAttributor
from rcattr.attribution.scorers import AttentionScorer, SpanScorer
from rcattr.baselines import BASELINES, AttentionAttributor
from rcattr.eval.attribution.rc_span_scorers import RCBoundScorer, RCScorer
from rcattr.heads.selectors import TopHeads
from rcattr.kvcache import EvictionPolicy, Ratio, Threshold, TokenBudget, WindowScorer

Builder = Callable[[Any, Any], SpanAttributor]

# the span scorers by name: the default's and the paper's RC-expectation pair (the benchmark's)
SPAN_SCORERS: dict[str, SpanScorer] = {
    "attention": AttentionScorer(),
    "rc": RCScorer(),
    "rc_bound": RCBoundScorer(),
}

# attributors with their own pass, each built from (model, tokenizer)
ATTRIBUTORS: dict[str, Builder] = {
    "default": lambda model, tokenizer: RCAttributor(model, tokenizer),
    "rc-std-heads-rc-scorer": lambda model, tokenizer: RCAttributor(
        model, tokenizer, TopHeads(3, score="rc_std"), span_scorer=RCScorer(), votes="mass"
    ),
    "attention-baseline": lambda model, tokenizer: AttentionAttributor(model, tokenizer),
    "lexical": lambda model, tokenizer: RCAttributor(model, tokenizer, TopHeads(4), lexical=True),
}

# each baseline's options on the tiny models: integrated gradients with two steps
BASELINE_OPTIONS: dict[str, dict[str, Any]] = {"integrated_gradients": {"n_steps": 2}}


def baseline(name: str, model, tokenizer) -> SpanAttributor:
    """The baseline ``name`` of :data:`rcattr.baselines.BASELINES` with its fast options."""
    return BASELINES[name](model, tokenizer, **BASELINE_OPTIONS.get(name, {}))


# RCKVCache's policies: changes to the default (half evicted over the model, value norms, 4 sinks), the paper's
POLICIES = {
    "paper": EvictionPolicy(Threshold(1.0, "head"), WindowScorer(value_norm=False, sinks=0)),
    "value_norm=False": EvictionPolicy(scorer=WindowScorer(value_norm=False)),
    "sinks=0": EvictionPolicy(scorer=WindowScorer(sinks=0)),
    "threshold per head": EvictionPolicy(Threshold(1.0, "head")),
    "threshold per layer": EvictionPolicy(Threshold(1.0, "layer")),
    "ratio,sinks=2": EvictionPolicy(Ratio(0.5), WindowScorer(sinks=2)),
    "ratio per head": EvictionPolicy(Ratio(0.5, "head")),
    "ratio per layer": EvictionPolicy(Ratio(0.5, "layer")),
    "budget per head": EvictionPolicy(TokenBudget(20, "head")),
}
