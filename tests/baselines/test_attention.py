"""The attention baseline (rcattr.baselines.attention): RC's attention scorer over every head."""

from __future__ import annotations

import pytest
import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.baselines import (
    AttentionAttributor,
)
from rcattr.heads.selectors import FixedHeads
from tests.helpers import tiny_model
from tests.helpers.attribution import ANSWER, BRACED_INPUT


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_attention_baseline_is_rc_over_every_head(arch, tokenizer) -> None:
    """Every head, on Gemma-3 its sliding heads whose window (5 tokens) does not reach the documents too."""
    model = tiny_model(arch)
    every_head = [(layer, head) for layer in range(3) for head in range(4)]
    fixed = RCAttributor.paper(model, tokenizer, heads=FixedHeads(every_head)).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk"
    )
    baseline = AttentionAttributor(model, tokenizer).attribute(BRACED_INPUT, ANSWER, granularity="chunk")
    torch.testing.assert_close(baseline.seq_attr, fixed.seq_attr)
    assert len(baseline.head_selection.heads) == 12
    assert (baseline.span_scorer, fixed.span_scorer) == ("attention, all heads", "attention")
