"""A layer's scores are plain data (rcattr.kvcache.scored): a rule decides on them, nothing else reads or changes a
layer through them (the layer cuts, tests/kvcache/test_layer.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rcattr.kvcache import Ratio
from rcattr.kvcache.scored import ChunkScores, DecodeScores, Scored

pytestmark = pytest.mark.transformers_line


def two_heads_chunk() -> ChunkScores:
    """A six-token chunk of two key heads: four candidates each, scored 0 to 7, and a window of 2."""
    return ChunkScores(
        torch.arange(8.0).view(1, 8),
        torch.zeros(1, 8, dtype=torch.bool),
        [4, 4],
        2,
        torch.ones(1, 6, dtype=torch.bool),
        0,
    )


def test_scores_are_frozen_data_with_no_method_of_their_own() -> None:
    scored = two_heads_chunk()
    with pytest.raises(dataclasses.FrozenInstanceError):
        scored.window = 3  # type: ignore[misc]
    for kind in (Scored, ChunkScores, DecodeScores):
        assert not [
            name for name, value in vars(kind).items() if callable(value) and not name.startswith("_")
        ]


def test_a_rule_decides_on_scores_alone() -> None:
    scored = two_heads_chunk()
    ((keep, threshold),) = Ratio(0.5, scope="layer").decide([scored])
    # half of 12 entries (8 candidates and the two heads' windows of 2, which count): the 2 best candidates
    assert keep.tolist() == [[False] * 6 + [True] * 2] and threshold is None
