"""The attention baseline (rcattr.baselines.attention): RC's attention scorer over every head."""

from __future__ import annotations

import torch

from rcattr.attributor import RCAttributor
from rcattr.baselines import (
    AttentionAttributor,
)
from rcattr.selectors import FixedHeads
from tests.helpers.attribution import ANSWER, BRACED_INPUT


def test_attention_baseline_is_rc_over_every_head(llama, tokenizer) -> None:
    every_head = [(layer, head) for layer in range(3) for head in range(4)]
    fixed = RCAttributor.paper(llama, tokenizer, heads=FixedHeads(every_head)).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk"
    )
    baseline = AttentionAttributor(llama, tokenizer).attribute(BRACED_INPUT, ANSWER, granularity="chunk")
    torch.testing.assert_close(baseline.seq_attr, fixed.seq_attr)
    assert len(baseline.head_selection.heads) == 12
    assert (baseline.span_scorer, fixed.span_scorer) == ("attention, all heads", "attention")
