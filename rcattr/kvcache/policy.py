"""How [`RCKVCache`][rcattr.kvcache.cache.RCKVCache] decides, as small objects that compose (docs/design.md §3).

* A selection rule, [`Threshold`][rcattr.kvcache.policy.Threshold] (`c` times the mean score), [`Ratio`][rcattr.kvcache.policy.Ratio] (a share of the entries)
  or [`TokenBudget`][rcattr.kvcache.policy.TokenBudget] (entries per key head), applies at a `scope`: each key head alone (`"head"`),
  the key heads of a layer together (`"layer"`), or every key head of every evicting layer together
  (`"model"`, decided once the last layer has scored), so heads and layers whose context scores high
  keep more (AdaKV's cross-head budget, across layers too).
* [`DecodeEviction`][rcattr.kvcache.policy.DecodeEviction] evicts again every `every` generated tokens, scored against the last window of
  queries, with its own rule or the prefill's.
* [`EvictionPolicy`][rcattr.kvcache.policy.EvictionPolicy] puts a rule, a [`WindowScorer`][rcattr.kvcache.scoring.WindowScorer] and an optional
  [`DecodeEviction`][rcattr.kvcache.policy.DecodeEviction] together.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import torch

from rcattr.kvcache.scored import Scored
from rcattr.kvcache.scoring import WindowScorer, adaptive_keep, budget_keep, fixed_ratio_keep
from rcattr.kvcache.state import LayerState

__all__ = [
    "DEFAULT_RATIO",
    "DecodeEviction",
    "EvictionPolicy",
    "Ratio",
    "Rule",
    "Scope",
    "Threshold",
    "TokenBudget",
]

Scope = Literal["head", "layer", "model"]
DEFAULT_RATIO = 0.5
"""The share of a prompt's entries `RCKVCache(model)` evicts when given no size: a context compressed before its
questions keeps their answers there (docs/benchmarks/kv-cache.md, "The default: half the context"), where `c=1` evicted
about 80% of a 2k one (81% on the default model) and changed them."""
SCOPES = ("head", "layer", "model")


class Rule(ABC):
    """Which scored entries a group keeps; a group is one key head, one layer or the model (`scope`)."""

    scope: Scope
    reranks: ClassVar[bool] = False  # at decode time, judge again what earlier evictions kept

    def _check_scope(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")

    @abstractmethod
    def keep(
        self, scores: torch.Tensor, protected: torch.Tensor, window_entries: int, heads: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The decision for `[B, G, m]` scores of G groups (`nan`: not a candidate).

        `protected [B, G, m]` entries (the sinks, at decode time the windows) are kept whatever their
        score and count in a ratio's or a budget's share; `window_entries` are the entries a group holds
        besides its `m` (the prefill's window), and `heads` the key heads it spans. Returns the
        `[B, G, m]` decision and the `[B, G]` thresholds (None where the rule has none).
        """

    @property
    def spans_layers(self) -> bool:
        """Whether the rule groups every evicting layer (`"model"` scope): their scores wait for the last."""
        return self.scope == "model"

    def decide(self, scored: Sequence[Scored]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Per layer of `scored` (every evicting layer at `"model"` scope, one otherwise), the `[B, S]`
        decision and the `[B, Hkv]` threshold that applied to each key head (None for ratios and budgets):
        the entries grouped as the scope says, then [`keep`][rcattr.kvcache.policy.Rule.keep] on each group."""
        batch = scored[0].scores.shape[0]

        def thresholds(threshold: torch.Tensor | None, heads: int) -> torch.Tensor | None:
            return None if threshold is None else threshold.expand(batch, heads)

        if self.scope == "model":
            per_layer = [len(s.slots) for s in scored]
            keep, threshold = self.keep(
                torch.cat([s.scores[:, None] for s in scored], dim=-1),
                torch.cat([s.protected[:, None] for s in scored], dim=-1),
                sum(s.window * h for s, h in zip(scored, per_layer, strict=True)),
                sum(per_layer),
            )
            parts = keep[:, 0].split([s.scores.shape[-1] for s in scored], dim=-1)
            return [(part, thresholds(threshold, h)) for part, h in zip(parts, per_layer, strict=True)]
        (layer,) = scored
        heads = len(layer.slots)
        if self.scope == "layer":
            keep, threshold = self.keep(
                layer.scores[:, None], layer.protected[:, None], layer.window * heads, heads
            )
            return [(keep[:, 0], thresholds(threshold, heads))]
        if len(set(layer.slots)) == 1:  # every key head as many candidates: decided at once
            shape = (batch, heads, layer.slots[0])
            keep, threshold = self.keep(
                layer.scores.view(shape), layer.protected.view(shape), layer.window, 1
            )
            return [(keep.reshape(batch, -1), threshold)]
        decided = [
            self.keep(scores[:, None], protected[:, None], layer.window, 1)
            for scores, protected in zip(
                layer.scores.split(layer.slots, -1), layer.protected.split(layer.slots, -1), strict=True
            )
        ]
        kept = torch.cat([keep[:, 0] for keep, _ in decided], dim=-1)
        per_head = [threshold for _, threshold in decided if threshold is not None]
        return [(kept, torch.cat(per_head, dim=1) if per_head else None)]


@dataclass(frozen=True)
class Threshold(Rule):
    """Keep the entries whose score reaches `c` times the group's mean score; `c = 0` keeps everything,
    larger `c` evicts more, and each group reaches its own compression."""

    c: float = 1.0
    scope: Scope = "model"

    def __post_init__(self) -> None:
        c = self.c
        if isinstance(c, bool) or not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 0):
            raise ValueError(f"c must be a finite number >= 0, got {c!r}")
        self._check_scope()

    def keep(
        self, scores: torch.Tensor, protected: torch.Tensor, window_entries: int, heads: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        keep, threshold = adaptive_keep(scores, self.c)
        return keep | protected, threshold


@dataclass(frozen=True)
class Ratio(Rule):
    """Evict the share `r` of the group's entries, lowest scores first (window and sinks count as kept)."""

    r: float
    scope: Scope = "model"

    def __post_init__(self) -> None:
        r = self.r
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r < 1.0:
            raise ValueError(f"ratio must be in [0, 1), got {r!r}")
        self._check_scope()

    def keep(
        self, scores: torch.Tensor, protected: torch.Tensor, window_entries: int, heads: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        ranked = scores.masked_fill(protected, float("inf"))
        return fixed_ratio_keep(ranked, self.r, window_entries), None


@dataclass(frozen=True)
class TokenBudget(Rule):
    """Keep `n` entries per key head on average, window and sinks included, shared by score over the group;
    at decode time everything held is ranked again, so the cache stays within `n + every` per head."""

    n: int
    scope: Scope = "model"
    reranks: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"budget must be an int >= 1, got {self.n!r}")
        self._check_scope()

    def keep(
        self, scores: torch.Tensor, protected: torch.Tensor, window_entries: int, heads: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        return budget_keep(scores, protected, self.n * heads - window_entries), None


@dataclass(frozen=True)
class DecodeEviction:
    """Evict again after every `every` generated tokens: each layer scores what it holds against its last
    `window` queries, the windows and the sinks kept, and decides with `rule` (default: the prefill's).
    A [`TokenBudget`][rcattr.kvcache.policy.TokenBudget] ranks everything held again; a [`Threshold`][rcattr.kvcache.policy.Threshold] or [`Ratio`][rcattr.kvcache.policy.Ratio] judges the
    entries no eviction has judged yet (the tokens generated since the last), so what was kept stays.

    Subclasses may score against more than the recent queries (override [`observe`][rcattr.kvcache.policy.DecodeEviction.observe] and [`window`][rcattr.kvcache.policy.DecodeEviction.window],
    and set `windows`, the windows always kept).
    """

    every: int
    rule: Rule | None = None
    windows: ClassVar[int] = 1

    def __post_init__(self) -> None:
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise ValueError(f"decode_every must be an int >= 1, got {self.every!r}")
        if self.rule is not None and not isinstance(self.rule, Rule):
            raise ValueError(f"rule must be a Threshold, Ratio or TokenBudget, got {self.rule!r}")

    def new_state(self) -> LayerState:
        """A layer's state before its first token."""
        return LayerState()

    def observe(self, state: LayerState, query: torch.Tensor, seen: int, window: int) -> None:
        """Keep the last `window` queries `[B, H, q, d]` the layer read (`seen` tokens so far)."""
        recent = torch.cat([state.recent, query], dim=2) if state.recent.numel() else query
        state.recent = recent[:, :, -window:]

    def window(self, state: LayerState, seen: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The queries `[B, H, w, d]` to score against and their `[w]` positions, in order."""
        recent = state.recent
        return recent, torch.arange(seen - recent.shape[-2], seen, device=recent.device)


@dataclass(frozen=True)
class EvictionPolicy:
    """A rule, a scorer and, optionally, decode-time eviction: what `RCKVCache(model, policy=...)` does.

    Parameters
    ----------
    rule : Threshold, Ratio or TokenBudget, default Ratio(DEFAULT_RATIO)
        How each compressed chunk (the prompt, a chat's next turn) is cut; by default half of its entries, over
        every key head of every evicting layer (`scope="model"`).
    scorer : WindowScorer, default WindowScorer()
        How its entries are scored (expected RC, value norm, sinks).
    decode : DecodeEviction, optional
        Evict again while generating. Default: generated tokens are all kept.
    chunks : {"prompt", "every"}, default "prompt"
        Which forwards of more than one token are compressed: the first alone (`"prompt"`: a question or
        a chat turn asked of a compressed context is kept whole, as it is short and exactly what the answer
        needs), or each of them (`"every"`, rcattr 0.1's behaviour).
        [`RCKVCache.compressing`][rcattr.kvcache.RCKVCache.compressing] chooses for the forwards of a block (a
        turn that brings a new document).

    Examples
    --------
    >>> EvictionPolicy(Ratio(0.6, scope="head"), WindowScorer(value_norm=False, sinks=0))
    >>> EvictionPolicy(TokenBudget(256), decode=DecodeEviction(every=32))
    """

    rule: Rule = Ratio(DEFAULT_RATIO)  # frozen: one instance serves every policy
    scorer: WindowScorer = field(default_factory=WindowScorer)
    decode: DecodeEviction | None = None
    chunks: Literal["prompt", "every"] = "prompt"

    def __post_init__(self) -> None:
        if self.chunks not in ("prompt", "every"):
            raise ValueError(f"chunks must be 'prompt' or 'every', got {self.chunks!r}")
        if not isinstance(self.rule, Rule):
            raise ValueError(f"rule must be a Threshold, Ratio or TokenBudget, got {self.rule!r}")
        if not isinstance(self.scorer, WindowScorer):
            raise ValueError(f"scorer must be a WindowScorer, got {self.scorer!r}")
        if self.decode is not None and not isinstance(self.decode, DecodeEviction):
            raise ValueError(f"decode must be a DecodeEviction or None, got {self.decode!r}")
        if self.decode is not None and self.scorer.reads_hidden_states:
            raise ValueError(
                f"{type(self.scorer).__name__} scores from the prefill's hidden states, which decode-time eviction "
                "does not keep: give it no decode"
            )

    @property
    def decode_rule(self) -> Rule:
        """The rule of decode-time evictions."""
        rule = None if self.decode is None else self.decode.rule
        return self.rule if rule is None else rule

    def new_state(self) -> LayerState:
        return LayerState() if self.decode is None else self.decode.new_state()

    def check_window(self, window: int) -> None:
        """Refuse a `window` of queries (kept whole, as many as the decode-time windows) that leaves a token
        budget no room besides itself and the sinks."""
        if isinstance(window, bool) or not (isinstance(window, int) and window >= 1):
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        room = window * (1 if self.decode is None else self.decode.windows) + self.scorer.sinks
        for rule in (self.rule, self.decode_rule):
            if isinstance(rule, TokenBudget) and rule.n <= room:
                raise ValueError(
                    f"budget={rule.n} leaves no room besides the windows ({room - self.scorer.sinks}) and the "
                    f"sinks ({self.scorer.sinks})"
                )

    @classmethod
    def of_sizes(
        cls,
        c: float | None = None,
        ratio: float | None = None,
        budget: int | None = None,
        decode_every: int | None = None,
    ) -> EvictionPolicy:
        """The policy of `RCKVCache(model, c, ratio=..., budget=..., decode_every=...)`: one of a threshold
        (`c`), a share to evict (default [`DEFAULT_RATIO`][rcattr.kvcache.policy.DEFAULT_RATIO]) and a token budget, at model scope, with
        decode-time eviction every `decode_every` tokens (a threshold's at layer scope: the new tokens against
        their layer's mean); ValueError naming the sizes when more than one is given."""
        chosen = {
            name: value
            for name, value in {"c": c, "ratio": ratio, "budget": budget}.items()
            if value is not None
        }
        if len(chosen) > 1:
            raise ValueError(
                "give one of c (an adaptive threshold), ratio (a share to evict) and budget (entries to keep): "
                + ", ".join(f"{name}={value!r}" for name, value in chosen.items())
            )
        rule: Rule
        if budget is not None:
            rule = TokenBudget(budget)
        elif c is not None:
            rule = Threshold(c)
        else:
            rule = Ratio(DEFAULT_RATIO if ratio is None else ratio)
        decode_rule = Threshold(rule.c, scope="layer") if isinstance(rule, Threshold) else None
        decode = None if decode_every is None else DecodeEviction(decode_every, decode_rule)
        return cls(rule, decode=decode)
