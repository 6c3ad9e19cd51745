"""The barrier (rcattr.kvcache.barrier) only gathers: a rule that spans layers gets every evicting layer's scores
once the last has scored, in order; one that does not gets each layer's at once."""

from __future__ import annotations

import pytest

from rcattr.kvcache.barrier import Barrier

pytestmark = pytest.mark.transformers_line


def test_a_rule_over_layers_waits_for_every_layer_and_gets_them_in_order() -> None:
    barrier: Barrier[str] = Barrier(layers=3)
    assert barrier.gather("first", spans_layers=True) == []
    assert barrier.gather("second", spans_layers=True) == []
    assert barrier.gather("third", spans_layers=True) == ["first", "second", "third"]
    assert barrier.gather("next forward", spans_layers=True) == []  # it starts again


def test_a_head_or_layer_rule_gets_each_layer_at_once() -> None:
    barrier: Barrier[str] = Barrier(layers=2)
    assert barrier.gather("first", spans_layers=False) == ["first"]
    assert barrier.gather("second", spans_layers=False) == ["second"]


def test_clear_drops_what_waits() -> None:
    barrier: Barrier[str] = Barrier(layers=2)
    barrier.gather("stale", spans_layers=True)
    barrier.clear()
    assert barrier.gather("first", spans_layers=True) == []
    assert barrier.gather("second", spans_layers=True) == ["first", "second"]
