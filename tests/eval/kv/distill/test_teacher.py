"""The teacher (rcattr.eval.kv.distill.teacher): the attention inputs of the replay's context are a plain
prefill's, and its targets are logs of attention weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import DynamicCache

from rcattr.eval.kv.distill.teacher import FLOOR, replay_teacher
from rcattr.kvcache import RCKVCache
from rcattr.kvcache.context.prompt import split_prompt
from rcattr.kvcache.distilled import attention_inputs
from rcattr.runtime.compat import cache_argument
from tests.helpers import char_tokenizer, kv_model

# the teacher reads the cache keyword of the installed transformers
pytestmark = pytest.mark.transformers_line


@pytest.mark.parametrize(
    "arch", ["llama", "gemma3"]
)  # Gemma-3: its full-attention layers, beside sliding ones
@torch.no_grad()
def test_the_teacher_reads_the_inputs_of_a_plain_prefill_of_the_context(arch) -> None:
    model, tokenizer = kv_model(arch), char_tokenizer()
    scores = replay_teacher(model, tokenizer, "The otter lives in the harbor. " * 3)
    context_ids = split_prompt(tokenizer, "The otter lives in the harbor. " * 3, "Repeat.").context_ids
    n = context_ids.shape[1]
    with attention_inputs(model, list(scores.hidden)) as held:
        model(context_ids, **cache_argument(model, DynamicCache(config=model.config)))
    assert list(scores.hidden) == RCKVCache(model, ratio=0.5).rc_layers
    for layer, hidden in scores.hidden.items():
        torch.testing.assert_close(hidden.float(), held[layer][0].half().float())
        target = scores.target[layer]
        assert target.shape == (model.config.num_key_value_heads, n)
        assert bool((target >= np.log(FLOOR) - 1e-6).all()) and bool((target <= 0).all())  # log of weights
