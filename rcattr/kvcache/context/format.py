"""What an `RCKVCache` holds, as tensors and JSON, and back: the format a compressed
context is saved in (`CompressedContext.save`).

Every layer's keys and values (sliding-window layers' too) and, for an evicting layer, the sequence position of
each slot, how many slots each key head owns, and its decisions (`LayerState`), so that
the restored cache answers, evicts, reports and saves again as the one saved. The policy is written as its
settings (`policy_settings`): the rules, scorers and decode-time eviction `rcattr.kvcache` offers; a
distilled scorer's predictor goes with the tensors.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel
from transformers.cache_utils import DynamicSlidingWindowLayer

from rcattr.kvcache.cache import RCKVCache
from rcattr.kvcache.distilled import DistilledScorer, ScorePredictor
from rcattr.kvcache.layer import RCLayer
from rcattr.kvcache.policy import DecodeEviction, EvictionPolicy, Ratio, Rule, Threshold, TokenBudget
from rcattr.kvcache.scoring import WindowScorer
from rcattr.kvcache.state import DecodeRecord, Eviction, LayerState

__all__ = ["cache_layout", "policy_from_settings", "policy_settings", "restore_cache"]

RULES: dict[str, type[Rule]] = {"Threshold": Threshold, "Ratio": Ratio, "TokenBudget": TokenBudget}
RULE_SIZES = {"Threshold": "c", "Ratio": "r", "TokenBudget": "n"}
DTYPES = {"float32": torch.float32, "float64": torch.float64}
PREDICTOR = "predictor."  # the prefix of a distilled scorer's predictor among the tensors


def policy_settings(policy: EvictionPolicy, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    """`policy` as JSON-ready settings (a distilled scorer's predictor added to `tensors`); ValueError for a
    rule, scorer or decode-time eviction of a class of one's own, whose settings rcattr cannot write."""
    scorer = policy.scorer
    if type(scorer) not in (WindowScorer, DistilledScorer):
        raise ValueError(_unsaved("scorer", scorer))
    if policy.decode is not None and type(policy.decode) is not DecodeEviction:
        raise ValueError(_unsaved("decode-time eviction", policy.decode))
    scorer_settings: dict[str, Any] = {
        "kind": type(scorer).__name__,
        "value_norm": scorer.value_norm,
        "sinks": scorer.sinks,
        "dtype": str(scorer.dtype).removeprefix("torch."),
    }
    if isinstance(scorer, DistilledScorer):
        predictor = scorer.predictor
        assert predictor is not None  # checked when made
        scorer_settings |= {"identity": predictor.identity, "info": predictor.info}
        for layer in predictor.layers:
            tensors[f"{PREDICTOR}{layer}.weight"] = predictor.weights[layer].contiguous()
            tensors[f"{PREDICTOR}{layer}.bias"] = predictor.biases[layer].contiguous()
    decode = policy.decode
    return {
        "rule": _rule_settings(policy.rule),
        "scorer": scorer_settings,
        "decode": None
        if decode is None
        else {"every": decode.every, "rule": None if decode.rule is None else _rule_settings(decode.rule)},
        "chunks": policy.chunks,
    }


def policy_from_settings(settings: dict[str, Any], tensors: dict[str, torch.Tensor]) -> EvictionPolicy:
    """The policy `policy_settings` wrote (its predictor read from `tensors`)."""
    scorer_settings = dict(settings["scorer"])
    kind = scorer_settings.pop("kind")
    options = {
        "value_norm": scorer_settings["value_norm"],
        "sinks": scorer_settings["sinks"],
        "dtype": DTYPES[scorer_settings["dtype"]],
    }
    scorer: WindowScorer
    if kind == "DistilledScorer":
        weights: dict[int, torch.Tensor] = {}
        biases: dict[int, torch.Tensor] = {}
        for name, tensor in tensors.items():
            if name.startswith(PREDICTOR):
                layer, part = name.removeprefix(PREDICTOR).split(".")
                (weights if part == "weight" else biases)[int(layer)] = tensor
        predictor = ScorePredictor(scorer_settings["identity"], weights, biases, scorer_settings["info"])
        scorer = DistilledScorer(predictor=predictor, **options)
    else:
        scorer = WindowScorer(**options)
    decode = settings["decode"]
    return EvictionPolicy(
        _rule(settings["rule"]),
        scorer,
        None if decode is None else DecodeEviction(decode["every"], decode["rule"] and _rule(decode["rule"])),
        settings["chunks"],
    )


def cache_layout(cache: RCKVCache, tensors: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    """Per layer, what `restore_cache` needs besides the tensors it adds to `tensors` (`layers.i.*`)."""
    layout: list[dict[str, Any]] = []
    for index, layer in enumerate(cache.layers):
        prefix = f"layers.{index}."
        if not isinstance(layer, (RCLayer, DynamicSlidingWindowLayer)):
            raise ValueError(f"layer {index} is a {type(layer).__name__}, which rcattr cannot save")
        if not layer.is_initialized or layer.keys is None or layer.values is None:
            layout.append({"kind": "empty"})
            continue
        tensors[prefix + "keys"], tensors[prefix + "values"] = layer.keys, layer.values
        if isinstance(layer, DynamicSlidingWindowLayer):
            layout.append({"kind": "sliding", "cumulative_length": int(layer.cumulative_length)})
            continue
        tensors[prefix + "positions"] = layer.positions
        state = layer.state
        if state.recent.numel():
            tensors[prefix + "recent"] = state.recent
        for number, eviction in enumerate(state.evictions):
            saved = f"{prefix}evictions.{number}."
            tensors[saved + "scores"], tensors[saved + "kept"] = eviction.scores, eviction.kept
            tensors[saved + "present"] = eviction.present
            if eviction.threshold is not None:
                tensors[f"{prefix}evictions.{number}.threshold"] = eviction.threshold
        for number, record in enumerate(state.decode_evictions):
            tensors[f"{prefix}decode_evictions.{number}.held"] = record.held
            if record.threshold is not None:
                tensors[f"{prefix}decode_evictions.{number}.threshold"] = record.threshold
        layout.append(
            {
                "kind": "evicting",
                "seen": layer.seen,
                "kv_heads": layer.kv_heads,
                "head_slots": layer.head_slots,
                "has_pads": layer.has_pads,
                "evictions": [eviction.start for eviction in state.evictions],
                "decode_evictions": [record.seen for record in state.decode_evictions],
                "judged_until": state.judged_until,
                "decoded": state.decoded,
            }
        )
    return layout


def restore_cache(
    model: PreTrainedModel,
    window: int,
    policy: EvictionPolicy,
    layout: list[dict[str, Any]],
    tensors: dict[str, torch.Tensor],
) -> RCKVCache:
    """An RCKVCache open on `model` holding what `cache_layout` described; ValueError where the layout
    does not fit the layers `model` builds."""
    cache = RCKVCache(model, window=window, policy=policy)
    if len(layout) != len(cache.layers):
        raise ValueError(f"it holds {len(layout)} layers; the model has {len(cache.layers)}")
    for index, (layer, saved) in enumerate(zip(cache.layers, layout, strict=True)):
        if saved["kind"] == "empty":
            continue
        kind = "evicting" if isinstance(layer, RCLayer) else "sliding"
        if saved["kind"] != kind or not isinstance(layer, (RCLayer, DynamicSlidingWindowLayer)):
            raise ValueError(f"layer {index} was saved as a {saved['kind']} layer; the model's is {kind}")
        prefix = f"layers.{index}."
        keys, values = tensors[prefix + "keys"], tensors[prefix + "values"]
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
        if isinstance(layer, DynamicSlidingWindowLayer):
            layer.cumulative_length = saved["cumulative_length"]
            continue
        layer.positions = tensors[prefix + "positions"]
        layer.seen, layer.kv_heads = saved["seen"], saved["kv_heads"]
        layer.head_slots, layer.has_pads = saved["head_slots"], saved["has_pads"]
        layer.state = _state(saved, tensors, prefix)
    return cache


def _state(saved: dict[str, Any], tensors: dict[str, torch.Tensor], prefix: str) -> LayerState:
    evictions = [
        Eviction(
            tensors[f"{prefix}evictions.{number}.scores"],
            tensors.get(f"{prefix}evictions.{number}.threshold"),
            tensors[f"{prefix}evictions.{number}.kept"],
            tensors[f"{prefix}evictions.{number}.present"],
            start,
        )
        for number, start in enumerate(saved["evictions"])
    ]
    records = [
        DecodeRecord(
            seen,
            tensors[f"{prefix}decode_evictions.{number}.held"],
            tensors.get(f"{prefix}decode_evictions.{number}.threshold"),
        )
        for number, seen in enumerate(saved["decode_evictions"])
    ]
    recent = tensors.get(prefix + "recent", torch.empty(0))
    return LayerState(evictions, records, recent, saved["judged_until"], saved["decoded"])


def _rule_settings(rule: Rule) -> dict[str, Any]:
    name = type(rule).__name__
    if RULES.get(name) is not type(rule):
        raise ValueError(_unsaved("rule", rule))
    return {"kind": name, "size": getattr(rule, RULE_SIZES[name]), "scope": rule.scope}


def _rule(settings: dict[str, Any]) -> Rule:
    rule: Any = RULES[settings["kind"]]  # each takes its size and a scope
    return rule(settings["size"], scope=settings["scope"])


def _unsaved(what: str, value: object) -> str:
    return (
        f"a {what} of a class of one's own ({type(value).__name__}) cannot be saved: rcattr writes the rules, "
        "scorers and decode-time eviction of rcattr.kvcache"
    )
