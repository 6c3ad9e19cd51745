"""RCKVCache: a transformers ``Cache`` that evicts, head by head, the prompt tokens the model will not need."""

from __future__ import annotations

import copy
import math
import weakref
from types import TracebackType

import torch
from transformers import PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

from rcattr.attention import attach, check_supported, detach, is_routed
from rcattr.kvcache.hook import CacheHook
from rcattr.kvcache.layer import DecodeScores, Eviction, EvictionPolicy, LayerBudget, RCLayer, WindowScores
from rcattr.kvcache.scoring import GroupReduce, Statistic, budget_keep

__all__ = ["RCKVCache", "cache_nbytes"]


class RCKVCache(Cache):
    """Adaptive head-wise KV eviction by relative contextualization (RCStat, docs/design.md §3).

    At prefill, for every full-attention layer and key head, each prompt token is scored by its
    expected RC against the last ``window`` prompt tokens times the norm of its value vector, and
    dropped when its score is below ``c`` times the mean score over every key head of every layer.
    The first ``sinks`` tokens and the window are always kept; tokens generated afterwards are always
    kept. Budgets therefore differ per head and per layer, set by the one knob ``c``. The prompt is
    compressed by the forward that fills the cache; every later forward of more than one token (the next
    turn of a chat, fed to the same cache) is scored against its own last ``window`` tokens and
    compressed the same way, while the entries kept before stay. :meth:`paper` gives the paper's recipe
    (no value norm, no sinks, a threshold per key head and layer); on the KV benchmark this default keeps
    the model's state closer to the full cache (docs/benchmarks.md, "Levers").

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM using sdpa, eager or flex attention (Llama, Mistral, Qwen2, Qwen3,
        Gemma3, Phi3, ...). Its attention is routed through rcattr's attention layer
        (:mod:`rcattr.attention`), which is transparent for other caches, until the cache is closed.
    c : float, optional
        Threshold multiplier, >= 0 (default 1.0): a token is evicted when ``score < c · mean score``.
        ``c = 0`` keeps everything; larger ``c`` evicts more. Not with ``ratio``.
    window : int, default 16
        The last prompt tokens that stand in for the generation (the paper uses 8 or 16).
    ratio : float, optional
        Instead of the adaptive threshold ``c``, evict this share of the prompt's entries, lowest scores
        first: over every key head of every layer together (``layer_budget="model"``), or the same
        share of every key head's prompt (``"layer"``, as fixed-ratio presses do).
    group_reduce : {"mean", "max"}, default "mean"
        With grouped-query attention, how a key head aggregates the scores of its query heads.
    statistic : {"expected", "upper_bound"}, default "expected"
        A token's score: its exact expected RC against the window, or the paper's upper bound of it,
        which holds for every coupling of the two samples (RCStat Thm 3.1).
    value_norm : bool, default True
        Multiply each token's score by the norm of its value vector (as Expected Attention does).
    sinks : int, default 4
        Always keep the first ``sinks`` prompt tokens in every head (attention sinks); they count in the
        head's mean score and, in ``ratio`` mode, in its budget.
    layer_budget : {"layer", "model"}, default "model"
        ``"layer"``: each key head of each layer gets its own threshold, ``c`` times its own mean score
        (or its own ``ratio``). ``"model"``: one threshold ``c`` times the mean score over every key
        head of every layer (or one ``ratio`` of all their entries), so layers and heads whose context
        scores high against the window keep more (AdaKV's cross-head budget, across layers too). The
        decision then waits for the prefill's last layer.
    score_dtype : torch.dtype, default torch.float32
        Accumulation dtype of the scores.
    decode_every : int, optional
        Decode-time eviction: after every ``decode_every`` generated tokens, each full-attention layer scores
        its entries against its last ``window`` queries with the same statistic and evicts, the window and
        the sinks kept. With ``budget``, everything it holds (prompt and generated) is ranked again and cut
        to the budget. Without, the tokens generated since the last eviction are judged, and those above ``c``
        times their mean score (over the layer's key heads) kept, so the cache grows by the share the
        threshold keeps. Default: only chunks (the prompt, a chat's next turn) are evicted; generated tokens
        are all kept.
    budget : int, optional
        A fixed token budget instead of the adaptive threshold: ``budget`` entries per key head on average,
        window and sinks included, shared by score by every key head of every full-attention layer
        (``layer_budget="model"``: ``budget × key heads × layers`` per batch row) or by the key heads of each
        layer (``"layer"``). Each chunk (the prompt) keeps that many of its entries; with ``decode_every``,
        each decode-time eviction cuts the cache back to it, so it stays within ``budget + decode_every``
        tokens per head (plus a later chunk's, e.g. the question) however long the generation. Not with
        ``c`` or ``ratio``.
    question_window : bool, default False
        With ``decode_every``: decode-time eviction scores against the window of the last chunk (the
        question, or the prompt's end) as well as the last ``window`` generated tokens, and keeps both, so
        that what the question reads survives a long answer whatever the answer is about at the time.

    Sliding-window layers (Gemma3, Qwen2 with ``use_sliding_window``) keep transformers' own sliding
    cache, already bounded by their window; the compression figures count the full-attention layers.

    Examples
    --------
    >>> cache = RCKVCache(model, c=1.0, window=16)
    >>> out = model.generate(**inputs, past_key_values=cache, max_new_tokens=32)
    >>> cache.compression_ratio, cache.nbytes(), cache.full_nbytes()
    """

    def __init__(
        self,
        model: PreTrainedModel,
        c: float | None = None,
        window: int = 16,
        *,
        ratio: float | None = None,
        group_reduce: GroupReduce = "mean",
        statistic: Statistic = "expected",
        value_norm: bool = True,
        sinks: int = 4,
        layer_budget: LayerBudget = "model",
        score_dtype: torch.dtype = torch.float32,
        decode_every: int | None = None,
        budget: int | None = None,
        question_window: bool = False,
    ) -> None:
        if c is not None and ratio is not None:
            raise ValueError(
                f"give either c (an adaptive threshold) or ratio (a fixed share to evict), not both: c={c!r}, "
                f"ratio={ratio!r}"
            )
        if not isinstance(question_window, bool):
            raise ValueError(f"question_window must be True or False, got {question_window!r}")
        if budget is not None and (ratio is not None or c is not None):
            raise ValueError(
                "give one of c (an adaptive threshold), ratio (a share of the prompt to evict) and budget "
                f"(entries to keep): c={c!r}, ratio={ratio!r}, budget={budget!r}"
            )
        c = 1.0 if c is None else c
        if isinstance(c, bool) or not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 0):
            raise ValueError(f"c must be a finite number >= 0, got {c!r}")
        if isinstance(window, bool) or not (isinstance(window, int) and window >= 1):
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        if ratio is not None and (
            isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 <= ratio < 1.0
        ):
            raise ValueError(f"ratio must be in [0, 1), got {ratio!r}")
        if group_reduce not in ("mean", "max"):
            raise ValueError(f"group_reduce must be 'mean' or 'max', got {group_reduce!r}")
        if statistic not in ("expected", "upper_bound"):
            raise ValueError(f"statistic must be 'expected' or 'upper_bound', got {statistic!r}")
        if not isinstance(value_norm, bool):
            raise ValueError(f"value_norm must be True or False, got {value_norm!r}")
        if not (isinstance(sinks, int) and not isinstance(sinks, bool) and sinks >= 0):
            raise ValueError(f"sinks must be an int >= 0, got {sinks!r}")
        if layer_budget not in ("layer", "model"):
            raise ValueError(f"layer_budget must be 'layer' or 'model', got {layer_budget!r}")
        if score_dtype not in (torch.float32, torch.float64):
            raise ValueError(f"score_dtype must be torch.float32 or torch.float64, got {score_dtype}")
        for name, value in (("decode_every", decode_every), ("budget", budget)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")
        protected = window * (2 if question_window else 1) + sinks
        if budget is not None and budget <= protected:
            raise ValueError(
                f"budget={budget} leaves no room besides the windows ({protected - sinks}) and the sinks ({sinks})"
            )
        check_supported(model)
        policy = EvictionPolicy(
            c=float(c),
            window=window,
            ratio=ratio,
            group_reduce=group_reduce,
            statistic=statistic,
            value_norm=value_norm,
            sinks=sinks,
            layer_budget=layer_budget,
            score_dtype=score_dtype,
            decode_every=decode_every,
            budget=budget,
            question_window=question_window,
        )
        layers = DynamicCache(config=model.config).layers
        if not layers:
            raise NotImplementedError(
                f"{type(model).__name__}: transformers builds no per-layer cache from its config"
            )
        joint = (
            (self._decide_jointly, self._decide_decoded_jointly) if layer_budget == "model" else (None, None)
        )
        layers = [
            RCLayer(i, policy, *joint) if type(layer) is DynamicLayer else layer
            for i, layer in enumerate(layers)
        ]
        if not any(isinstance(layer, RCLayer) for layer in layers):
            raise NotImplementedError(
                f"every layer of {type(model).__name__} uses sliding-window attention, whose cache is already "
                "bounded by the window; RCKVCache evicts from full-attention layers only"
            )
        super().__init__(layers=layers)
        self.policy = policy
        self._model = weakref.ref(model)
        self._scored: dict[int, tuple[RCLayer, WindowScores]] = {}  # layer_budget="model": until the last
        self._decoded: dict[int, tuple[RCLayer, DecodeScores]] = {}  # the same at decode time
        self._open(model)

    def _open(self, model: PreTrainedModel) -> None:
        """Add this cache's hook to ``model``'s attention until :meth:`close` (or garbage collection)."""
        self._hook = CacheHook()
        attach(model, self._hook)
        self._release = weakref.finalize(self, detach, model, self._hook)

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

    def close(self) -> None:
        """Give the model its own attention back (once no other open RCKVCache of it remains); the cache
        cannot be filled afterwards. Also done by ``with RCKVCache(model) as cache:`` and when the cache
        is garbage-collected."""
        self._release()

    def __enter__(self) -> RCKVCache:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @classmethod
    def paper(
        cls, model: PreTrainedModel, c: float | None = None, window: int = 16, **options: object
    ) -> RCKVCache:
        """The RCStat paper's recipe: expected RC alone, a threshold per key head and layer, no sinks.

        ``options`` are passed on (``ratio``, ``group_reduce``, ...) and may override the recipe's own.
        """
        recipe: dict[str, object] = {"value_norm": False, "sinks": 0, "layer_budget": "layer"}
        return cls(model, c, window, **{**recipe, **options})  # type: ignore[arg-type]

    def _decide_jointly(self, layer: RCLayer, scored: WindowScores) -> None:
        """Collect every evicting layer's scores; at the last one, decide for all with one threshold."""
        self._scored[layer.layer_idx] = (layer, scored)
        if len(self._scored) < len(self.rc_layers):
            return
        pending = [self._scored.pop(index) for index in sorted(self._scored)]
        batch = pending[0][1].before.shape[0]
        flat = torch.cat([s.before.reshape(batch, 1, -1) for _, s in pending], dim=-1)
        protected = torch.cat([s.protected.reshape(batch, 1, -1) for _, s in pending], dim=-1)
        window_entries = sum(s.window * s.before.shape[1] for _, s in pending)
        heads = sum(s.before.shape[1] for _, s in pending)
        keep, threshold = self.policy.keep(flat, protected, window_entries, heads)
        sizes = [s.before[0].numel() for _, s in pending]
        for (rc_layer, s), kept in zip(pending, keep.split(sizes, dim=-1), strict=True):
            heads = s.before.shape[1]
            rc_layer.apply(
                s, kept.view_as(s.before), None if threshold is None else threshold.expand(batch, heads)
            )

    def _decide_decoded_jointly(self, layer: RCLayer, scored: DecodeScores) -> None:
        """Collect every evicting layer's decode-time scores; at the last one, keep the best ``budget`` entries
        per key head of the whole model, shared by every layer and head."""
        self._decoded[layer.layer_idx] = (layer, scored)
        if len(self._decoded) < len(self.rc_layers):
            return
        pending = [self._decoded.pop(index) for index in sorted(self._decoded)]
        assert self.policy.budget is not None
        heads = sum(rc_layer.kv_heads for rc_layer, _ in pending)
        keep = budget_keep(
            torch.cat([s.scores for _, s in pending], dim=-1),
            torch.cat([s.protected for _, s in pending], dim=-1),
            self.policy.budget * heads,
        )
        for (rc_layer, s), kept in zip(
            pending, keep.split([s.scores.shape[-1] for _, s in pending], dim=-1), strict=True
        ):
            rc_layer.apply_decoded(s, kept, None)

    def update(
        self,
        key_states: torch.Tensor,
        value_states: torch.Tensor,
        layer_idx: int,
        *args: object,
        **kwargs: object,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the new keys and values of ``layer_idx`` and return what the attention reads."""
        model = self._model()
        if model is None or not is_routed(model) or not self._release.alive:
            raise RuntimeError(
                "the model's attention no longer goes through RCKVCache (the cache was closed, or "
                "set_attn_implementation was called after it was created), so the model's attention "
                "bypasses RCKVCache; create the cache after the last set_attn_implementation call"
            )
        keys, values = super().update(key_states, value_states, layer_idx, *args, **kwargs)
        layer = self.layers[layer_idx]
        if isinstance(layer, RCLayer):
            self._hook.expect(layer, keys)
        return keys, values

    def activate_past_recording(self) -> None:
        """Refused: transformers asks for it before assisted (speculative) decoding, which rolls the cache back."""
        raise NotImplementedError(
            "RCKVCache does not support assisted or speculative decoding (assistant_model, prompt_lookup_num_tokens): "
            "they roll the cache back, and evicted tokens cannot come back"
        )

    @property
    def rc_layers(self) -> list[int]:
        """Indices of the layers RCKVCache evicts from (the full-attention ones)."""
        return [i for i, layer in enumerate(self.layers) if isinstance(layer, RCLayer)]

    @property
    def evictions(self) -> list[Eviction | None]:
        """Per layer, the prefill's scores and decisions (None for sliding layers or before prefill);
        later chunks' (a chat's next turns) are in each layer's ``evictions`` list."""
        return [layer.eviction if isinstance(layer, RCLayer) else None for layer in self.layers]

    @property
    def kept_indices(self) -> list[list[torch.Tensor] | None]:
        """Per layer and key head, ``[B, slots]`` the sequence positions the head holds (-1: pad slot of a
        batch row that keeps fewer tokens); None for sliding layers and before the prefill."""
        return [
            layer.kept_indices() if isinstance(layer, RCLayer) and layer.positions is not None else None
            for layer in self.layers
        ]

    @property
    def head_compression_ratio(self) -> torch.Tensor:
        """``[layers, B, Hkv]`` share of each key head's prompt evicted (every chunk); ``nan`` for layers
        not evicted from."""
        shape = self._decided()[0].evicted_share().shape
        return torch.stack(
            [
                layer.evicted_share().float()
                if isinstance(layer, RCLayer) and layer.prefilled
                else torch.full(shape, float("nan"))
                for layer in self.layers
            ]
        )

    @property
    def layer_compression_ratio(self) -> torch.Tensor:
        """``[layers]`` share of each layer's prompt entries evicted (all rows, key heads and chunks);
        ``nan`` if none."""
        self._decided()
        shares = []
        for layer in self.layers:
            kept, entries = layer.entries() if isinstance(layer, RCLayer) and layer.prefilled else (0, 0)
            shares.append(1.0 - kept / entries if entries else float("nan"))
        return torch.tensor(shares)

    @property
    def compression_ratio(self) -> float:
        """Evicted prompt entries / all prompt entries, over the evicted-from layers, rows, key heads and
        chunks (the prompt and every later multi-token forward)."""
        entries = [layer.entries() for layer in self._decided()]
        return 1.0 - sum(kept for kept, _ in entries) / max(sum(total for _, total in entries), 1)

    def _decided(self) -> list[RCLayer]:
        decided = [layer for layer in self.layers if isinstance(layer, RCLayer) and layer.prefilled]
        if not decided:
            raise RuntimeError("no prompt has gone through this cache yet")
        return decided

    def nbytes(self) -> int:
        """Bytes the cache holds now: keys and values of every layer, pad slots and slot positions included."""
        return cache_nbytes(self)

    def padding_nbytes(self) -> int:
        """Bytes of pad slots: batch rows that keep fewer tokens than the longest row of the same head."""
        return sum(layer.padding_nbytes() for layer in self.layers if isinstance(layer, RCLayer))

    def full_nbytes(self) -> int:
        """Bytes transformers' ``DynamicCache`` would hold for the same tokens."""
        return sum(
            layer.full_nbytes() if isinstance(layer, RCLayer) else _layer_nbytes(layer)
            for layer in self.layers
        )


def cache_nbytes(cache: Cache) -> int:
    """Bytes any transformers cache holds: keys and values of every layer (and RCKVCache's slot positions)."""
    return sum(_layer_nbytes(layer) for layer in cache.layers)


def _layer_nbytes(layer: object) -> int:
    if isinstance(layer, RCLayer):
        return layer.nbytes()
    tensors = (getattr(layer, "keys", None), getattr(layer, "values", None))
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)
