"""RCKVCache: a transformers `Cache` that evicts, head by head, the prompt tokens the model will not need."""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Any, SupportsIndex

import torch
from transformers import PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

from rcattr.kvcache.barrier import Barrier
from rcattr.kvcache.distilled import feed_attention_inputs
from rcattr.kvcache.hook import CacheHook
from rcattr.kvcache.layer import RCLayer
from rcattr.kvcache.policy import EvictionPolicy, Threshold
from rcattr.kvcache.scored import Scored
from rcattr.kvcache.scoring import WindowScorer
from rcattr.kvcache.state import Eviction, LayerState
from rcattr.runtime.attention import (
    AttentionCall,
    AttentionOutput,
    attach,
    check_supported,
    detach,
    is_routed,
)
from rcattr.runtime.memory import release_freed_memory

__all__ = ["RCKVCache", "cache_nbytes"]


class RCKVCache(Cache):
    """Head-wise KV eviction by relative contextualization (RCStat, docs/design.md §3).

    At prefill, for every full-attention layer and key head, each prompt token is scored by its expected
    RC against the last `window` prompt tokens times the norm of its value vector; by default the lowest half
    of those scores, over every key head of every layer, is dropped (`ratio=0.5`), so budgets differ per head
    and per layer. `c` gives the paper's adaptive threshold instead (`score < c · mean score`; `c=1` was
    the default before rcattr 0.2 and evicts about 80% of a 2k context compressed before its questions). The first 4
    tokens (attention sinks) and the window are always kept. What comes after the prompt (a question asked of the
    compressed context, a chat's next turn) is kept whole; inside `with cache.compressing():` (a turn that
    brings a new document) each forward of more than one token is scored against its own last `window` tokens
    and compressed the same way, entries kept before staying. [`paper`][rcattr.kvcache.cache.RCKVCache.paper] gives the paper's recipe; `policy`
    any other ([`EvictionPolicy`][rcattr.kvcache.policy.EvictionPolicy]: a selection rule at a scope, a scorer such as
    [`DistilledScorer`][rcattr.kvcache.distilled.DistilledScorer], a distilled replay score for contexts compressed before their
    questions, decode-time eviction).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM using sdpa, eager or flex attention (Llama, Mistral, Qwen2, Qwen3,
        Gemma3, Phi3, ...). Its attention is routed through rcattr's attention layer
        ([`rcattr.runtime.attention`][rcattr.runtime.attention]), which is transparent for other caches, until the cache is closed.
    c : float, optional
        Threshold multiplier, >= 0: a token is evicted when `score < c · mean score`, so each prompt loses
        what its scores say it can spare. `c = 0` keeps everything; larger `c` evicts more. Not with
        `ratio` or `budget`.
    window : int, default 16
        The last prompt tokens that stand in for the generation (the paper uses 8 or 16).
    ratio : float, optional
        The share of the prompt's entries to evict, in [0, 1) (default 0.5 when neither `c` nor `budget` is
        given): the lowest scores over every key head of every full-attention layer go first (`Ratio(ratio)`),
        window and sinks kept.
        With `decode_every`, each decode-time eviction evicts that share of the tokens generated since the
        last.
    budget : int, optional
        A fixed token budget instead of the threshold: `budget` entries per key head on average, window
        and sinks included, shared by score by every key head of every full-attention layer. With
        `decode_every`, each decode-time eviction cuts the cache back to it, so it stays within
        `budget + decode_every` tokens per head (plus a later chunk's) however long the generation.
    decode_every : int, optional
        Decode-time eviction: after every `decode_every` generated tokens, each full-attention layer
        scores its entries against its last `window` queries and evicts, the window and the sinks kept.
        With `budget`, everything held is ranked again and cut to the budget; without, the tokens
        generated since the last eviction are judged against `c` times their mean score over the layer's
        key heads, or the `ratio` of them evicted. Default: generated tokens are all kept.
    policy : EvictionPolicy, optional
        The composable form, instead of `c`, `ratio`, `budget` and `decode_every`: another scorer
        (`EvictionPolicy(Ratio(0.5), DistilledScorer(predictor=ScorePredictor.shipped(model)))` predicts a
        replay of the context), scope or decode-time rule.

    Notes
    -----
    Sliding-window layers (Gemma3, Qwen2 with `use_sliding_window`) keep transformers' own sliding
    cache, already bounded by their window; the compression figures count the full-attention layers.

    Examples
    --------
    >>> cache = RCKVCache(model)  # half of the prompt's entries evicted
    >>> out = model.generate(**inputs, **cache_argument(model, cache), max_new_tokens=32)
    >>> cache.compression_ratio, cache.nbytes(), cache.full_nbytes()
    >>> RCKVCache(model, c=1.0, window=16)  # the paper's threshold: each prompt its own share
    >>> RCKVCache(model, policy=EvictionPolicy(Ratio(0.75), DistilledScorer(predictor=ScorePredictor.shipped(model))))
    >>> RCKVCache(model, budget=256, decode_every=32)
    >>> with cache.compressing():  # a chat turn that brings a new document is compressed too
    ...     model(**new_turn, **cache_argument(model, cache))
    >>> chunked_prefill(model, RCKVCache(model, ratio=0.5), long_ids)  # each chunk cut before the next: a lower peak
    >>> RCKVCache(model, policy=EvictionPolicy(Ratio(0.6, scope="head"), decode=DecodeEviction(every=32)))
    """

    def __init__(
        self,
        model: PreTrainedModel,
        c: float | None = None,
        window: int = 16,
        *,
        ratio: float | None = None,
        budget: int | None = None,
        decode_every: int | None = None,
        policy: EvictionPolicy | None = None,
    ) -> None:
        policy = _policy(c, ratio, budget, decode_every, policy)
        policy.check_window(window)
        check_supported(model)
        layers = DynamicCache(config=model.config).layers
        if not layers:
            raise NotImplementedError(
                f"{type(model).__name__}: transformers builds no per-layer cache from its config"
            )
        evicting = [type(layer) is DynamicLayer for layer in layers]
        if not any(evicting):
            raise NotImplementedError(
                f"every layer of {type(model).__name__} uses sliding-window attention, whose cache is already "
                "bounded by the window; RCKVCache evicts from full-attention layers only"
            )
        policy.scorer.check_model(model, [i for i, evicts in enumerate(evicting) if evicts])
        self._barrier: Barrier[tuple[RCLayer, Scored]] = Barrier(sum(evicting))  # a "model" rule's: all
        layers = [
            RCLayer(policy, window) if evicts else layer
            for layer, evicts in zip(layers, evicting, strict=True)
        ]
        super().__init__(layers=layers)
        self.policy, self.window = policy, window
        self._model = weakref.ref(model)
        self._open(model)

    def _open(self, model: PreTrainedModel) -> None:
        """Add this cache's hook to `model`'s attention until [`close`][rcattr.kvcache.cache.RCKVCache.close] (or garbage collection), and, for a
        scorer that reads hidden states, the hooks that hand each evicting layer its attention input."""
        self._hook = CacheHook(weakref.ref(self))
        feed = (
            feed_attention_inputs(model, self, list(self.evicting_layers))
            if self.policy.scorer.reads_hidden_states
            else None
        )
        attach(model, self._hook)
        self._release = weakref.finalize(self, _close, model, self._hook, feed)

    def __deepcopy__(self, memo: dict[int, object]) -> RCKVCache:
        """A copy that holds the same entries and is open on the same model (e.g. to continue one compressed
        prompt twice); closing either leaves the other open."""
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        for name, value in vars(self).items():
            if name not in ("_hook", "_release"):
                setattr(clone, name, copy.deepcopy(value, memo))
        model = self._model()
        if model is None or not self._release.alive:
            raise RuntimeError("this RCKVCache is closed (or its model is gone); a copy could not be filled")
        clone._open(model)
        return clone

    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[Any, ...]:
        raise TypeError(
            "an RCKVCache is open on its model and cannot be pickled: keep a compressed context with "
            "rcattr.kvcache.compress_context(...).save(path) and CompressedContext.load(path, model, tokenizer)"
        )

    def close(self) -> None:
        """Give the model its own attention back (once no other open RCKVCache of it remains); the cache
        cannot be filled afterwards. Also done by `with RCKVCache(model) as cache:` and when the cache
        is garbage-collected."""
        self._release()

    def compressing(self, compress: bool = True) -> AbstractContextManager[RCKVCache]:
        """Inside the block, every forward of more than one token after the prompt is compressed (`True`: a
        chat turn that brings a new document) or kept whole (`False`), whatever `policy.chunks` says."""
        if not isinstance(compress, bool):
            raise ValueError(f"compress must be True or False, got {compress!r}")
        return self._layers_set("compressing", compress)

    def replaying(self, context: int) -> AbstractContextManager[RCKVCache]:
        """Inside the block, the prefill reads `context` tokens, a prompt, then the same `context` tokens
        again: each context key is scored against the replay's queries (the window), and the cache keeps the
        context alone, cut by the rule ([`rcattr.kvcache.replay.replay_prefill`][rcattr.kvcache.replay.replay_prefill] does it all)."""
        if isinstance(context, bool) or not isinstance(context, int) or context < 1:
            raise ValueError(f"context must be an int >= 1, got {context!r}")
        if any(layer.state.prefilled for layer in self.evicting_layers.values()):
            raise RuntimeError("a replay scores the prefill, and this RCKVCache is already filled")
        return self._layers_set("replayed", context)

    @contextmanager
    def _layers_set(self, attribute: str, value: object) -> Iterator[RCKVCache]:
        """Set `attribute` of every evicting layer to `value` inside the block, and back after."""
        layers = list(self.evicting_layers.values())
        before = [getattr(layer, attribute) for layer in layers]
        for layer in layers:
            setattr(layer, attribute, value)
        try:
            yield self
        finally:
            for layer, setting in zip(layers, before, strict=True):
                setattr(layer, attribute, setting)

    def __enter__(self) -> RCKVCache:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @classmethod
    def paper(cls, model: PreTrainedModel, c: float | None = None, window: int = 16) -> RCKVCache:
        """The RCStat paper's recipe: expected RC alone (no value norm, no sinks), a threshold per key head."""
        rule = Threshold(1.0 if c is None else c, scope="head")
        return cls(model, window=window, policy=EvictionPolicy(rule, WindowScorer(value_norm=False, sinks=0)))

    def update(
        self,
        key_states: torch.Tensor,
        value_states: torch.Tensor,
        layer_idx: int,
        *args: object,
        **kwargs: object,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the new keys and values of `layer_idx` and return what the attention reads."""
        model = self._model()
        if model is None or not is_routed(model) or not self._release.alive:
            raise RuntimeError(
                "the model's attention no longer goes through RCKVCache (the cache was closed, or "
                "set_attn_implementation was called after it was created), so the model's attention "
                "bypasses RCKVCache; create the cache after the last set_attn_implementation call"
            )
        keys, values = super().update(key_states, value_states, layer_idx, *args, **kwargs)
        if isinstance(self.layers[layer_idx], RCLayer):
            self._hook.expect(layer_idx, keys)
        return keys, values

    def attention(self, call: AttentionCall, proceed: Callable[[], AttentionOutput]) -> AttentionOutput:
        """The attention call of an evicting layer: the layer attends over what it holds and scores it
        ([`RCLayer.scores_after`][rcattr.kvcache.layer.RCLayer.scores_after]); the rule decides once every
        layer it groups has reported (each layer alone, or every evicting layer for a `"model"`-scope rule),
        and each of those layers cuts ([`RCLayer.cut`][rcattr.kvcache.layer.RCLayer.cut])."""
        layer = self.layers[call.layer_idx]
        if not isinstance(layer, RCLayer):
            raise RuntimeError(f"layer {call.layer_idx} of this RCKVCache does not evict")
        call = layer.placed(call)
        output = layer.attention(call, proceed)
        step = layer.scores_after(call)
        if step is None:
            return output
        ready = self._barrier.gather((layer, step.scored), step.rule.spans_layers)
        if ready:
            decisions = step.rule.decide([scored for _, scored in ready])
            for (reported, scored), (keep, threshold) in zip(ready, decisions, strict=True):
                reported.cut(scored, keep, threshold)
                release_freed_memory()  # what the layer no longer holds, before the next one is re-packed
        return output

    def reset(self) -> None:
        """Forget everything: every layer's entries and decisions, and any scores waiting for a decision."""
        super().reset()
        self._barrier.clear()

    def activate_past_recording(self, *args: object, **kwargs: object) -> None:
        """Refused: transformers asks for it before assisted (speculative) decoding, which rolls the cache back."""
        raise NotImplementedError(
            "RCKVCache does not support assisted or speculative decoding (assistant_model, prompt_lookup_num_tokens): "
            "they roll the cache back, and evicted tokens cannot come back"
        )

    @property
    def evicting_layers(self) -> dict[int, RCLayer]:
        """The layers RCKVCache evicts from (the full-attention ones), by index."""
        return {i: layer for i, layer in enumerate(self.layers) if isinstance(layer, RCLayer)}

    @property
    def states(self) -> dict[int, LayerState]:
        """Each evicting layer's decisions (its [`RCLayer.state`][rcattr.kvcache.layer.RCLayer]), by layer index."""
        return {i: layer.state for i, layer in self.evicting_layers.items()}

    @property
    def rc_layers(self) -> list[int]:
        """Indices of the layers RCKVCache evicts from (the full-attention ones)."""
        return list(self.evicting_layers)

    @property
    def evictions(self) -> list[Eviction | None]:
        """Per layer, the prefill's scores and decisions (None for sliding layers or before prefill);
        later chunks' and decode-time evictions are in [`states`][rcattr.kvcache.cache.RCKVCache.states]."""
        return [
            layer.state.evictions[0] if isinstance(layer, RCLayer) and layer.state.prefilled else None
            for layer in self.layers
        ]

    @property
    def kept_indices(self) -> list[list[torch.Tensor] | None]:
        """Per layer and key head, `[B, slots]` the sequence positions the head holds (-1: pad slot of a
        batch row that keeps fewer tokens); None for sliding layers and before the prefill."""
        return [
            layer.kept_indices() if isinstance(layer, RCLayer) and layer.is_initialized else None
            for layer in self.layers
        ]

    @property
    def head_compression_ratio(self) -> torch.Tensor:
        """`[layers, B, Hkv]` share of each key head's prompt evicted (every chunk); `nan` for layers
        not evicted from."""
        shares = {i: state.evicted_share().float() for i, state in self._decided().items()}
        shape = next(iter(shares.values())).shape
        return torch.stack([shares.get(i, torch.full(shape, float("nan"))) for i in range(len(self.layers))])

    @property
    def layer_compression_ratio(self) -> torch.Tensor:
        """`[layers]` share of each layer's prompt entries evicted (all rows, key heads and chunks);
        `nan` if none."""
        decided = self._decided()
        shares = []
        for i in range(len(self.layers)):
            kept, entries = decided[i].entries() if i in decided else (0, 0)
            shares.append(1.0 - kept / entries if entries else float("nan"))
        return torch.tensor(shares)

    @property
    def compression_ratio(self) -> float:
        """Evicted prompt entries / all prompt entries, over the evicted-from layers, rows, key heads and
        compressed chunks (the prompt, and a later forward compressed by [`compressing`][rcattr.kvcache.cache.RCKVCache.compressing])."""
        entries = [state.entries() for state in self._decided().values()]
        return 1.0 - sum(kept for kept, _ in entries) / max(sum(total for _, total in entries), 1)

    def _decided(self) -> dict[int, LayerState]:
        decided = {i: state for i, state in self.states.items() if state.prefilled}
        if not decided:
            raise RuntimeError("no prompt has gone through this cache yet")
        return decided

    def nbytes(self) -> int:
        """Bytes the cache holds now: keys and values of every layer, pad slots and slot positions included."""
        return cache_nbytes(self)

    def padding_nbytes(self) -> int:
        """Bytes of pad slots: batch rows that keep fewer tokens than the longest row of the same head."""
        return sum(layer.padding_nbytes() for layer in self.evicting_layers.values())

    def full_nbytes(self) -> int:
        """Bytes transformers' `DynamicCache` would hold for the same tokens."""
        return sum(
            layer.full_nbytes() if isinstance(layer, RCLayer) else _layer_nbytes(layer)
            for layer in self.layers
        )


def _policy(
    c: float | None,
    ratio: float | None,
    budget: int | None,
    decode_every: int | None,
    policy: EvictionPolicy | None,
) -> EvictionPolicy:
    """The policy of `RCKVCache(model, c, ratio=..., budget=..., decode_every=..., policy=...)`, or a
    ValueError naming the arguments that do not go together."""
    if policy is None:
        return EvictionPolicy.of_sizes(c, ratio, budget, decode_every)
    given = {"c": c, "ratio": ratio, "budget": budget, "decode_every": decode_every}
    clashing = ", ".join(f"{name}={value!r}" for name, value in given.items() if value is not None)
    if clashing:
        raise ValueError(
            f"give policy alone or c, ratio, budget and decode_every without it, not both: {clashing}"
        )
    if not isinstance(policy, EvictionPolicy):
        raise ValueError(f"policy must be an EvictionPolicy, got {policy!r}")
    return policy


def _close(model: PreTrainedModel, hook: CacheHook, feed: Callable[[], None] | None) -> None:
    detach(model, hook)
    if feed is not None:
        feed()


def cache_nbytes(cache: Cache) -> int:
    """Bytes any transformers cache holds: keys and values of every layer (and RCKVCache's slot positions)."""
    return sum(_layer_nbytes(layer) for layer in cache.layers)


def _layer_nbytes(layer: object) -> int:
    if isinstance(layer, RCLayer):
        return layer.nbytes()
    tensors = (getattr(layer, "keys", None), getattr(layer, "values", None))
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)
