"""Where an evicting layer's scores wait for their decision: the one thing of :class:`~rcattr.kvcache.RCKVCache`
that spans layers. A rule at ``"head"`` or ``"layer"`` scope decides for each layer as soon as it has scored;
one at ``"model"`` scope (:attr:`Rule.spans_layers <rcattr.kvcache.policy.Rule.spans_layers>`) once the last
evicting layer of the forward has, over all of them together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr.kvcache.eviction import Scored
from rcattr.kvcache.policy import Rule

if TYPE_CHECKING:
    from rcattr.kvcache.layer import RCLayer

__all__ = ["Barrier"]


class Barrier:
    """Holds the scores of the evicting layers that have scored in this forward, until the rule decides.

    Parameters
    ----------
    layers : int
        The evicting layers of the cache (a model-scope rule waits for this many).
    """

    def __init__(self, layers: int) -> None:
        self.layers = layers
        self._waiting: list[tuple[RCLayer, Scored]] = []

    def submit(self, layer: RCLayer, rule: Rule, scored: Scored) -> None:
        """Add ``layer``'s scores; decide and apply when ``rule`` has all the layers it groups."""
        self._waiting.append((layer, scored))
        if rule.spans_layers and len(self._waiting) < self.layers:
            return
        waiting, self._waiting = self._waiting, []
        decisions = rule.decide([scores for _, scores in waiting])
        for (waiting_layer, scores), (keep, threshold) in zip(waiting, decisions, strict=True):
            scores.apply(waiting_layer, keep, threshold)

    def clear(self) -> None:
        """Drop the scores that wait (the cache was reset)."""
        self._waiting = []
