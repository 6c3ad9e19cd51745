"""The caches the KV benchmark compares, one small class per kind, all behind [`KVMethod`][rcattr.eval.kv.methods.KVMethod].

* [`FullCache`][rcattr.eval.kv.methods.FullCache]: transformers' `DynamicCache`, the reference.
* [`RCMethod`][rcattr.eval.kv.methods.RCMethod]: [`RCKVCache`][rcattr.kvcache.cache.RCKVCache] at a threshold `c` and window `w`, with a
  variant of its scoring options ([`rc_options`][rcattr.eval.kv.variants.rc_options]); its compression is whatever the adaptive
  threshold reaches.
* [`PressMethod`][rcattr.eval.kv.methods.PressMethod]: a kvpress press at a set ratio, applied as kvpress's own pipeline applies it
  (`with press(model): model.model(context, past_key_values=DynamicCache())`).

Every method compresses the context at prefill and nothing after. [`KVMethod.compression`][rcattr.eval.kv.methods.KVMethod.compression] measures
what the cache really holds afterwards: the share of context entries (layers × key heads × tokens) gone
from it or masked out of attention, and its bytes against the full cache's.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from transformers import Cache, DynamicCache, PreTrainedModel

from rcattr.eval.kv.presses import EAGER_PRESSES, PRESSES, TOKENIZER_PRESSES
from rcattr.eval.kv.scorers import (
    AblationScorer,
    BlendedScorer,
    MaxPooledScorer,
    QueryMaxScorer,
    SoftmaxMaxScorer,
)
from rcattr.eval.kv.variants import PAPER_VARIANT, rc_options
from rcattr.kvcache import (
    EvictionPolicy,
    Ratio,
    RCKVCache,
    Threshold,
    WindowScorer,
    cache_nbytes,
    chunked_prefill,
)
from rcattr.kvcache.distilled import DistilledScorer, ScorePredictor
from rcattr.kvcache.replay import REPLAY_PROMPT, replay_prefill
from rcattr.runtime.compat import attention_implementation, cache_argument, set_attention_implementation
from rcattr.runtime.models import PACKAGED_MODELS, packaged_model_dir


def rc_policy(
    variant: str,
    c: float = 1.0,
    *,
    ratio: float | None = None,
    chunks: str = "every",
    scale: float = 1.0,
    predictor: ScorePredictor | None = None,
) -> EvictionPolicy:
    """RCKVCache's policy for `variant` ([`rc_options`][rcattr.eval.kv.variants.rc_options]) at the threshold `c`, or evicting the share
    `ratio`; `chunks` says whether the question after the context is compressed too ("every", the
    question-after-context protocol's RCKVCache) or kept ("prompt"); `scale` is the model's attention
    scaling (the softmax statistic's); `predictor` the distilled score's (None: only checked)."""
    options = rc_options(variant)
    statistic, pooling = options["statistic"], options["pooling"]
    scorer: WindowScorer
    if options["probe"] == "distilled":
        if statistic != "expected" or pooling != "mean":
            raise ValueError(f"{variant!r}: the distilled score goes with no other statistic or pooling")
        if predictor is None:  # checked only: the model is not known yet
            scorer = WindowScorer(options["value_norm"], options["sinks"])
        elif options["blend"]:
            scorer = BlendedScorer(
                options["value_norm"], options["sinks"], predictor=predictor, window_share=options["blend"]
            )
        else:
            scorer = DistilledScorer(options["value_norm"], options["sinks"], predictor=predictor)
    elif statistic == "softmax":
        scorer = SoftmaxMaxScorer(options["value_norm"], options["sinks"], scale=scale)
    elif options["probe"] == "replay" or pooling == "max":
        if statistic != "expected":
            raise ValueError(
                f"{variant!r}: a replay and max pooling go with the expected or softmax statistic"
            )
        # a replay's window is the whole context: each query is its own reference (the window's w x w own
        # logits would cost O(n^2 log n) per head and layer)
        kind = QueryMaxScorer if options["probe"] == "replay" else MaxPooledScorer
        scorer = kind(options["value_norm"], options["sinks"])
    elif statistic != "expected":
        scorer = AblationScorer(options["value_norm"], options["sinks"], statistic=statistic)
    else:
        scorer = WindowScorer(options["value_norm"], options["sinks"])
    scope = options["scope"]
    rule = Threshold(c, scope=scope) if ratio is None else Ratio(ratio, scope=scope)
    return EvictionPolicy(rule, scorer, chunks=chunks)  # type: ignore[arg-type]


KVPRESS_HINT = (
    "kvpress is not installed in this environment; it pins transformers < 5.3, so it has its own: "
    "`make setup-kvpress`, then run with .venv-kvpress/bin/python"
)


def import_kvpress() -> Any:
    """The `kvpress` module, or an ImportError saying how to get the environment it needs."""
    try:
        import kvpress
    except ImportError as error:
        raise ImportError(KVPRESS_HINT) from error
    return kvpress


def require_kvpress() -> None:
    """End the command with how to get kvpress when it is missing: before anything loads."""
    try:
        import_kvpress()
    except ImportError as error:
        raise SystemExit(str(error)) from error


@contextmanager
def eager_attention(model: PreTrainedModel) -> Iterator[None]:
    """Run `model` with eager attention inside the block, and with its own implementation again after."""
    previous = attention_implementation(model)
    set_attention_implementation(model, "eager")
    try:
        yield
    finally:
        set_attention_implementation(model, previous)


@contextmanager
def local_name_or_path(model: PreTrainedModel) -> Iterator[None]:
    """Inside the block, `model.config.name_or_path` is the packaged model's folder when it names one, so a
    press that calls `AutoTokenizer.from_pretrained(model.config.name_or_path)` loads it offline."""
    name = model.config.name_or_path
    if name not in PACKAGED_MODELS:
        yield
        return
    model.config.name_or_path = str(packaged_model_dir(name))
    try:
        yield
    finally:
        model.config.name_or_path = name


@dataclass(frozen=True)
class Compression:
    """What a cache holds after the context's prefill."""

    ratio: float  # context entries evicted or masked / all context entries (layers x key heads x tokens)
    bytes_ratio: float  # bytes held / bytes of the full cache


class KVMethod(ABC):
    """A way to build and fill the cache for a context; `label` names it in the results."""

    name: str

    @property
    @abstractmethod
    def label(self) -> str: ...

    @property
    def setting(self) -> dict[str, Any]:
        return {}

    @abstractmethod
    def prefill(self, model: PreTrainedModel, context_ids: torch.Tensor) -> Cache:
        """Run `context_ids [1, n]` through `model` into a new cache, compressing it; return the cache."""

    def compression(self, model: PreTrainedModel, cache: Cache, n_context: int) -> Compression:
        """Measured from the cache itself: the entries it holds against `n_context` per layer and key head."""
        return _held(model, cache, n_context)


def _held(model: PreTrainedModel, cache: Cache, n_context: int, masked: int = 0) -> Compression:
    """The compression of a cache of `[B, Hkv, seq, d]` layers that holds `masked` entries no query sees."""
    text = model.config.get_text_config()
    full_entries = text.num_hidden_layers * text.num_key_value_heads * n_context
    keys: list[torch.Tensor] = [layer.keys for layer in cache.layers]  # type: ignore[union-attr,misc]
    held = sum(k.shape[1] * k.shape[2] for k in keys)
    full_bytes = sum(2 * k[:, :, :1].numel() * n_context * k.element_size() for k in keys)
    return Compression(1.0 - (held - masked) / full_entries, cache_nbytes(cache) / full_bytes)


@dataclass(frozen=True)
class FullCache(KVMethod):
    """No compression: the reference every method is compared with."""

    name = "full"

    @property
    def label(self) -> str:
        return "full"

    def prefill(self, model: PreTrainedModel, context_ids: torch.Tensor) -> Cache:
        cache = DynamicCache()
        model.model(input_ids=context_ids, **cache_argument(model.model, cache))
        return cache


@dataclass(frozen=True)
class RCMethod(KVMethod):
    """RCKVCache: head-wise adaptive budgets from the RC statistic of the last `window` context tokens (or of
    a replay of the context), scored as `variant` says ([`rc_options`][rcattr.eval.kv.variants.rc_options]), cut at the threshold `c` or,
    given `ratio`, to that share. `chunks` is the policy's ([`EvictionPolicy`][rcattr.kvcache.policy.EvictionPolicy])."""

    c: float
    window: int
    variant: str = PAPER_VARIANT
    ratio: float | None = None
    chunks: str = "every"
    name = "rc"

    def __post_init__(self) -> None:
        rc_policy(self.variant, self.c, ratio=self.ratio, chunks=self.chunks)
        options = rc_options(self.variant)
        if options["probe"] == "replay" and options["prefill_chunk"] is not None:
            raise ValueError(f"{self.variant!r}: a replay is one forward over the context; it is not chunked")

    @property
    def label(self) -> str:
        suffix = "" if self.variant == PAPER_VARIANT else f"/{self.variant}"
        cut = f"c={self.c:g}" if self.ratio is None else f"r={self.ratio:g}"
        return f"rc/{cut}/w={self.window}{suffix}"

    @property
    def setting(self) -> dict[str, Any]:
        variant = {} if self.variant == PAPER_VARIANT else {"variant": self.variant}
        cut = {"c": self.c} if self.ratio is None else {"ratio": self.ratio}
        return {**cut, "window": self.window, **variant}

    def prefill(self, model: PreTrainedModel, context_ids: torch.Tensor) -> Cache:
        options = rc_options(self.variant)
        predictor = shipped_predictor(model) if options["probe"] == "distilled" else None
        policy = rc_policy(
            self.variant,
            self.c,
            ratio=self.ratio,
            chunks=self.chunks,
            scale=attention_scale(model),
            predictor=predictor,
        )
        cache = RCKVCache(model, window=self.window, policy=policy)
        if options["probe"] == "replay":
            replay_prefill(model, cache, context_ids, replay_prompt_ids(model))
        elif options["prefill_chunk"] is not None:
            chunked_prefill(model, cache, context_ids, chunk_size=options["prefill_chunk"])
        else:
            model.model(input_ids=context_ids, **cache_argument(model.model, cache))
        return cache

    def compression(self, model: PreTrainedModel, cache: Cache, n_context: int) -> Compression:
        assert isinstance(cache, RCKVCache)
        return Compression(cache.compression_ratio, cache.nbytes() / cache.full_nbytes())


def shipped_predictor(model: PreTrainedModel) -> ScorePredictor:
    """The score predictor shipped for `model`, or ValueError naming the command that fits one."""
    predictor = ScorePredictor.shipped(model)
    if predictor is None:
        raise ValueError(
            f"no score predictor ships for {model.config.name_or_path}: fit one with python -m rcattr.eval.kv.distill"
        )
    return predictor


def attention_scale(model: PreTrainedModel) -> float:
    """The scaling `model`'s attention applies to its logits (read off its first attention module)."""
    for module in model.modules():
        scaling = getattr(module, "scaling", None)
        if isinstance(scaling, float):
            return scaling
    text = model.config.get_text_config()
    return float(getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads) ** -0.5


def replay_prompt_ids(model: PreTrainedModel) -> torch.Tensor:
    """`[1, p]` [`REPLAY_PROMPT`][rcattr.kvcache.replay.REPLAY_PROMPT] as the question part of the benchmark's prompt (the
    chat template's end of the user turn and assistant opening), in `model`'s tokenizer."""
    with local_name_or_path(model):
        return _replay_prompt_ids(model.config.name_or_path)


@functools.lru_cache(maxsize=4)
def _replay_prompt_ids(name_or_path: str) -> torch.Tensor:
    """[`replay_prompt_ids`][rcattr.eval.kv.methods.replay_prompt_ids] by tokenizer folder, loaded once per folder (every replayed prefill asks)."""
    from transformers import AutoTokenizer

    from rcattr.kvcache.context.prompt import split_prompt

    return split_prompt(AutoTokenizer.from_pretrained(name_or_path), "context", REPLAY_PROMPT).question_ids


@dataclass(frozen=True)
class PressMethod(KVMethod):
    """A kvpress press (`name` in [`PRESSES`][rcattr.eval.kv.methods.PRESSES]) at compression ratio `ratio`."""

    name: str
    ratio: float

    def __post_init__(self) -> None:
        if self.name not in PRESSES:
            raise ValueError(f"unknown press {self.name!r}; choose from {', '.join(PRESSES)}")
        if not 0.0 <= self.ratio < 1.0:
            raise ValueError(f"a compression ratio is in [0, 1), got {self.ratio}")

    @property
    def label(self) -> str:
        return f"{self.name}/r={self.ratio:g}"

    @property
    def setting(self) -> dict[str, Any]:
        return {"ratio": self.ratio}

    def prefill(self, model: PreTrainedModel, context_ids: torch.Tensor) -> Cache:
        press = PRESSES[self.name](import_kvpress(), self.ratio)
        cache = DynamicCache()
        # a head-wise press's mask of the last context must not outlive it: kvpress clears it only in the
        # kernels it patched, which eager attention bypasses (setattr: nn.Module types its attributes as tensors)
        for module in model.modules():
            if getattr(module, "masked_key_indices", None) is not None:
                setattr(module, "masked_key_indices", None)  # noqa: B010
        attention = eager_attention(model) if self.name in EAGER_PRESSES else nullcontext()
        naming = local_name_or_path(model) if self.name in TOKENIZER_PRESSES else nullcontext()
        with attention, naming, press(model):
            model.model(input_ids=context_ids, **cache_argument(model.model, cache))
        return cache

    def compression(self, model: PreTrainedModel, cache: Cache, n_context: int) -> Compression:
        # head-wise presses (AdaKV) keep every entry and mask the evicted ones out of attention
        masked = sum(
            int(indices[0].numel())
            for module in model.modules()
            if (indices := getattr(module, "masked_key_indices", None)) is not None
        )
        return _held(model, cache, n_context, masked)
