"""Where an evicting layer's scores wait for their decision: the one thing of [`RCKVCache`][rcattr.kvcache.cache.RCKVCache]
that spans layers. It only gathers: a rule at `"head"` or `"layer"` scope decides for each layer as soon as it
has scored; one at `"model"` scope ([`Rule.spans_layers`][rcattr.kvcache.policy.Rule.spans_layers]) once the
last evicting layer of the forward has, over all of them together.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["Barrier"]

Waiting = TypeVar("Waiting")


class Barrier(Generic[Waiting]):
    """Holds what the evicting layers have scored in this forward until the rule can decide.

    Parameters
    ----------
    layers : int
        The evicting layers of the cache (a model-scope rule waits for this many).
    """

    def __init__(self, layers: int) -> None:
        self.layers = layers
        self._waiting: list[Waiting] = []

    def gather(self, scored: Waiting, spans_layers: bool) -> list[Waiting]:
        """Add one layer's `scored`; return everything to decide now, in the order it came: that one alone
        for a rule that does not span layers, every layer's once the last has scored for one that does, and
        nothing while it waits."""
        self._waiting.append(scored)
        if spans_layers and len(self._waiting) < self.layers:
            return []
        waiting, self._waiting = self._waiting, []
        return waiting

    def clear(self) -> None:
        """Drop the scores that wait (the cache was reset)."""
        self._waiting = []
