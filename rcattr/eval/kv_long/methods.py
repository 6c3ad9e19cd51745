"""The caches the long-generation benchmark compares, all held to one token budget ([`DecodeBudget`][rcattr.eval.kv_long.config.DecodeBudget]).

* [`FullDecoding`][rcattr.eval.kv_long.methods.FullDecoding]: transformers' `DynamicCache`, the reference; it grows with every token.
* [`RCDecoding`][rcattr.eval.kv_long.methods.RCDecoding]: [`RCKVCache`][rcattr.kvcache.cache.RCKVCache] with `budget` entries per key head at prefill and,
  with decode-time eviction, cut back to them every `every` generated tokens (`rc`; `rc_question` also
  scores against the question's window, [`QuestionWindow`][rcattr.eval.kv_long.question.QuestionWindow]); without it (`rc_prefill_only`), every generated token is kept.
* [`DecodingPressMethod`][rcattr.eval.kv_long.methods.DecodingPressMethod]: kvpress's `PrefillDecodingPress`: a scorer press prunes the context to the
  budget at prefill, and a `DecodingPress` of the same scorer cuts the cache back to it every `every`
  tokens, with kvpress's own hooks (`with press(model)` around the prefill, then around the decoding, as
  kvpress's pipeline does).

Each method's [`start`][rcattr.eval.kv_long.methods.LongMethod.start] prefills a context and returns a [`Decoder`][rcattr.eval.kv_long.methods.Decoder]: the cache, and the
context manager that every later forward (question, answer) runs inside.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import Cache, DynamicCache, PreTrainedModel

from rcattr.eval.kv.methods import import_kvpress
from rcattr.eval.kv_long.config import DECODING_SCORERS, DecodeBudget
from rcattr.eval.kv_long.question import QuestionWindow
from rcattr.kvcache import DecodeEviction, EvictionPolicy, RCKVCache, TokenBudget
from rcattr.runtime.compat import cache_argument


@dataclass
class Decoder:
    """A prefilled `cache` and the context every later forward runs inside (kvpress's hooks, or none)."""

    cache: Cache
    decoding: Callable[[], AbstractContextManager[Any]] = field(default=nullcontext)


class LongMethod(ABC):
    """A cache of the long-generation benchmark; `label` names it in the results."""

    name: str

    @property
    def label(self) -> str:
        return self.name

    @abstractmethod
    def start(self, model: PreTrainedModel, context_ids: torch.Tensor, budget: DecodeBudget) -> Decoder:
        """Prefill `context_ids [1, n]` into a new cache (compressed to `budget`)."""


def _prefill(model: PreTrainedModel, cache: Cache, context_ids: torch.Tensor) -> Cache:
    model.model(input_ids=context_ids, **cache_argument(model.model, cache))
    return cache


@dataclass(frozen=True)
class FullDecoding(LongMethod):
    """No compression: the reference."""

    name: str = "full"

    def start(self, model: PreTrainedModel, context_ids: torch.Tensor, budget: DecodeBudget) -> Decoder:
        return Decoder(_prefill(model, DynamicCache(), context_ids))


@dataclass(frozen=True)
class RCDecoding(LongMethod):
    """RCKVCache with the budget at prefill; with `decode_time`, also every `budget.every` tokens, scored
    against the recent tokens (and, with `question_window`, the question's window too: [`QuestionWindow`][rcattr.eval.kv_long.question.QuestionWindow])."""

    decode_time: bool = True
    question_window: bool = False

    def __post_init__(self) -> None:
        if self.question_window and not self.decode_time:
            raise ValueError(
                "question_window=True needs decode_time=True: the question's window scores decode-time eviction"
            )

    @property
    def name(self) -> str:  # type: ignore[override]
        if not self.decode_time:
            return "rc_prefill_only"
        return "rc_question" if self.question_window else "rc"

    def start(self, model: PreTrainedModel, context_ids: torch.Tensor, budget: DecodeBudget) -> Decoder:
        decode = None
        if self.decode_time:
            decode = (QuestionWindow if self.question_window else DecodeEviction)(budget.every)
        # the question after the context is cut to the budget too, as when these rows were measured (rcattr 0.1)
        policy = EvictionPolicy(TokenBudget(budget.tokens), decode=decode, chunks="every")
        return Decoder(_prefill(model, RCKVCache(model, policy=policy), context_ids))


def prefill_ratio(context_tokens: int, kept: int) -> float:
    """The compression ratio with which a kvpress scorer keeps `kept` of `context_tokens` (it keeps
    `int(n · (1 - ratio))`); 0 when the context fits."""
    return max(0.0, 1.0 - (kept + 0.5) / context_tokens)


@dataclass(frozen=True)
class DecodingPressMethod(LongMethod):
    """kvpress's `PrefillDecodingPress` of the scorer `scorer` (a key of [`DECODING_SCORERS`][rcattr.eval.kv_long.methods.DECODING_SCORERS])."""

    scorer: str

    def __post_init__(self) -> None:
        if self.scorer not in DECODING_SCORERS:
            raise ValueError(f"unknown scorer {self.scorer!r}; choose from {', '.join(DECODING_SCORERS)}")

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"kvpress_{self.scorer}"

    def start(self, model: PreTrainedModel, context_ids: torch.Tensor, budget: DecodeBudget) -> Decoder:
        kvpress, make = import_kvpress(), DECODING_SCORERS[self.scorer]
        press = kvpress.PrefillDecodingPress(
            prefilling_press=make(kvpress, prefill_ratio(context_ids.shape[1], budget.tokens), budget.every),
            decoding_press=kvpress.DecodingPress(
                make(kvpress, 0.0, budget.every),
                compression_interval=budget.every,
                target_size=budget.tokens,
            ),
        )
        with press(model):
            cache = _prefill(model, DynamicCache(), context_ids)
        return Decoder(cache, lambda: press(model))


def long_methods() -> dict[str, LongMethod]:
    """Every method by name: the full cache, RCKVCache with and without decode-time eviction, then kvpress's
    decoding press of every scorer."""
    methods: list[LongMethod] = [
        FullDecoding(),
        RCDecoding(),
        RCDecoding(question_window=True),
        RCDecoding(decode_time=False),
        *(DecodingPressMethod(scorer) for scorer in DECODING_SCORERS),
    ]
    return {method.name: method for method in methods}
