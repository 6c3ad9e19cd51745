"""A layer's scores and how a decision is carried out on it (rcattr.kvcache.scored): the kept entries stay in the
layer's storage, the decision is recorded in its state."""

from __future__ import annotations

import pytest
import torch

from rcattr.kvcache.headwise import HeadwiseLayer
from rcattr.kvcache.scored import ChunkScores, DecodeScores
from rcattr.kvcache.state import LayerState

pytestmark = pytest.mark.transformers_line


def filled_layer(n: int = 6, kv_heads: int = 2) -> HeadwiseLayer:
    layer = HeadwiseLayer()
    torch.manual_seed(0)
    layer.update(torch.randn(1, kv_heads, n, 4), torch.randn(1, kv_heads, n, 4))
    return layer


def test_a_chunk_s_decision_keeps_its_window_and_is_recorded() -> None:
    layer, state = filled_layer(), LayerState()
    window = 2  # the last two tokens: kept whatever the decision
    scores = torch.arange(8, dtype=torch.float).view(1, 8)  # 4 candidates per key head
    scored = ChunkScores(
        scores, torch.zeros(1, 8, dtype=torch.bool), [4, 4], window, torch.ones(1, 6, dtype=torch.bool), 0
    )
    keep = torch.tensor([[True, False, False, True, False, True, True, False]])
    scored.apply(layer, state, keep, None)
    assert [positions.tolist() for positions in layer.kept_indices()] == [[[0, 3, 4, 5]], [[1, 2, 4, 5]]]
    (eviction,) = state.evictions
    assert eviction.kept.tolist() == [
        [[True, False, False, True, True, True], [False, True, True, False, True, True]]
    ]
    assert state.judged_until == layer.seen - window and eviction.threshold is None


def test_a_decode_time_decision_records_what_each_head_holds() -> None:
    layer, state = filled_layer(n=4), LayerState()
    state.recent = torch.zeros(1, 2, 1, 4)  # one recent query
    keep = torch.tensor([[True, True, False, True, False, True, True, True]])
    scored = DecodeScores(torch.zeros(1, 8), torch.zeros(1, 8, dtype=torch.bool), [4, 4], 0)
    scored.apply(layer, state, keep, None)
    (record,) = state.decode_evictions
    assert record.held.tolist() == [[[True, True, False, True], [False, True, True, True]]]
    assert state.decoded == 0 and state.judged_until == 3
