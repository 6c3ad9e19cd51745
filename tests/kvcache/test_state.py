"""What an evicting layer has decided (rcattr.kvcache.state): shares evicted and entries counted without padding."""

from __future__ import annotations

import pytest
import torch

from rcattr.kvcache import Eviction, LayerState

pytestmark = pytest.mark.transformers_line


def _eviction(kept: list[list[list[bool]]], present: list[list[bool]], start: int = 0) -> Eviction:
    kept_tensor = torch.tensor(kept)
    scores = torch.zeros(kept_tensor.shape, dtype=torch.float32)
    return Eviction(scores, None, kept_tensor, torch.tensor(present), start)


# two rows, two key heads, four tokens; the second row's first token is padding (never kept)
PREFILL = _eviction(
    [
        [[True, False, True, True], [False, False, False, True]],
        [[False, True, True, True], [False, False, True, True]],
    ],
    [[True, True, True, True], [False, True, True, True]],
)
TURN = _eviction([[[True, True]] * 2, [[False, True]] * 2], [[True, True], [True, True]], start=4)


def test_an_eviction_counts_the_share_of_real_tokens_each_head_evicted() -> None:
    torch.testing.assert_close(PREFILL.compression_ratio, torch.tensor([[0.25, 0.75], [0.0, 1 / 3]]))
    assert PREFILL.prompt_entries == 7 * 2  # 7 real tokens, 2 key heads


def test_a_layer_state_sums_its_chunks() -> None:
    state = LayerState()
    assert not state.prefilled
    state.evictions += [PREFILL, TURN]
    assert state.prefilled
    assert state.entries() == (9 + 6, 14 + 8)
    torch.testing.assert_close(state.evicted_share(), torch.tensor([[1 / 6, 1 / 2], [1 / 5, 2 / 5]]))


def test_select_reindexes_the_query_buffers_only() -> None:
    state = LayerState(recent=torch.arange(6.0).view(3, 2), judged_until=5)
    state.select(lambda t: t[[2, 0]])
    assert state.recent.tolist() == [[4.0, 5.0], [0.0, 1.0]]
    assert state.judged_until == 5
    empty = LayerState()
    empty.select(lambda t: pytest.fail("an empty buffer is not selected"))
    assert empty.recent.numel() == 0
