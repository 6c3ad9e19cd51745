"""The barrier (rcattr.kvcache.barrier): a model-scope rule decides once every evicting layer has scored,
over all of them; a head or layer rule decides for each layer at once."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from rcattr.kvcache import Ratio, TokenBudget
from rcattr.kvcache.barrier import Barrier
from rcattr.kvcache.eviction import Scored

pytestmark = pytest.mark.transformers_line


@dataclass(frozen=True)
class Recorded(Scored):
    """Scores that record the decisions applied to them."""

    applied: list[torch.Tensor] = field(default_factory=list)

    def apply(self, layer, keep, threshold) -> None:
        self.applied.append(keep)


def scored(values: list[float]) -> Recorded:
    scores = torch.tensor([values])
    return Recorded(scores, torch.zeros_like(scores, dtype=torch.bool), [len(values)], 0)


def test_a_model_scope_rule_waits_for_every_layer_and_ranks_them_together() -> None:
    barrier, rule = Barrier(layers=2), TokenBudget(2)  # 2 entries per key head: 4 over the two layers
    first, second = scored([1.0, 5.0, 2.0]), scored([4.0, 3.0, 0.0])
    barrier.submit(None, rule, first)  # type: ignore[arg-type]
    assert first.applied == []
    barrier.submit(None, rule, second)  # type: ignore[arg-type]
    assert first.applied[0].tolist() == [[False, True, True]]  # 5 and 2 of the best four: 5, 4, 3, 2
    assert second.applied[0].tolist() == [[True, True, False]]


@pytest.mark.parametrize("scope", ["head", "layer"])
def test_a_head_or_layer_rule_decides_for_each_layer_at_once(scope) -> None:
    barrier, rule = Barrier(layers=2), Ratio(0.5, scope=scope)
    first = scored([1.0, 5.0, 2.0, 0.0])
    barrier.submit(None, rule, first)  # type: ignore[arg-type]
    assert first.applied[0].tolist() == [[False, True, True, False]]


def test_clear_drops_what_waits() -> None:
    barrier, rule = Barrier(layers=2), TokenBudget(1)
    stale = scored([1.0])
    barrier.submit(None, rule, stale)  # type: ignore[arg-type]
    barrier.clear()
    first, second = scored([1.0, 2.0]), scored([3.0, 0.0])
    barrier.submit(None, rule, first)  # type: ignore[arg-type]
    barrier.submit(None, rule, second)  # type: ignore[arg-type]
    assert stale.applied == [] and first.applied and second.applied
