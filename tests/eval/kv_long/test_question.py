"""Decode-time eviction against the question's window too (rcattr.eval.kv_long.question): exact, and both
windows kept."""

from __future__ import annotations

import pytest

from rcattr.eval.kv_long.question import QuestionWindow
from rcattr.kvcache import EvictionPolicy, RCKVCache, TokenBudget
from tests.helpers import kv_model
from tests.reference.kv import assert_decode_time_eviction_is_exact


@pytest.mark.parametrize(("batch", "pad"), [(1, 0), (2, 5)])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_question_window_eviction_equals_masking_exactly_the_evicted_positions(
    arch, attn, batch, pad
) -> None:
    policy = EvictionPolicy(TokenBudget(13), decode=QuestionWindow(every=3))
    assert_decode_time_eviction_is_exact(kv_model(arch, attn), batch, pad, 13, policy)


def test_a_budget_leaves_room_for_both_windows() -> None:
    with pytest.raises(ValueError, match="leaves no room"):
        RCKVCache(
            kv_model("llama"), window=4, policy=EvictionPolicy(TokenBudget(12), decode=QuestionWindow(3))
        )
