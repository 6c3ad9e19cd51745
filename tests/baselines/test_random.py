"""The random baseline (rcattr.baselines.random): seeded by the example alone."""

from __future__ import annotations

import torch

from rcattr.baselines import (
    RandomAttributor,
)
from tests.helpers.attribution import ANSWER, BRACED_INPUT


def test_random_depends_on_the_seed_and_the_example_only(llama, tokenizer) -> None:
    attributor = RandomAttributor(llama, tokenizer, seed=3)
    first = attributor.attribute(BRACED_INPUT, ANSWER, granularity="chunk")
    other_answer = attributor.attribute(BRACED_INPUT, "Something else entirely.", granularity="chunk")
    again = attributor.attribute(BRACED_INPUT, ANSWER, granularity="chunk")  # whatever ran in between
    torch.testing.assert_close(first.token_attr, again.token_attr)
    fresh = RandomAttributor(llama, tokenizer, seed=3).attribute(BRACED_INPUT, ANSWER, granularity="chunk")
    torch.testing.assert_close(first.token_attr, fresh.token_attr)
    other_seed = RandomAttributor(llama, tokenizer, seed=4).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk"
    )
    assert not torch.equal(first.seq_attr, other_seed.seq_attr)
    assert not torch.equal(first.seq_attr, other_answer.seq_attr)
