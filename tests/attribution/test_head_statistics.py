"""Per-token context signals (rcattr.attribution.head_statistics) against eager attention and brute force."""

from __future__ import annotations

import copy

import pytest
import torch

from rcattr.attribution.head_statistics import LookbackReducer, PeakSuperiorityReducer
from rcattr.runtime.capture import LogitCapture, LogitStore
from tests.helpers import tiny_model


@torch.no_grad()
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_lookback_ratio_equals_one_from_eager_attention(arch):
    model = tiny_model(arch)
    ids = torch.randint(3, 128, (1, 14))
    context_keys, start = torch.tensor([2, 3, 4, 6, 7]), 9
    reducer = LookbackReducer(context_keys, start)
    with LogitCapture(model, reducer, query_positions=slice(start, None)):
        model(ids)

    eager = copy.deepcopy(model)
    eager.set_attn_implementation("eager")
    attentions = eager(ids, output_attentions=True).attentions  # per layer [1, H, S, S]
    for layer, attention in enumerate(attentions):
        for row in range(start, 14):
            on_context = attention[0, :, row, context_keys].mean(-1)
            on_answer = attention[0, :, row, start : row + 1].mean(-1)
            expected = on_context / (on_context + on_answer)
            torch.testing.assert_close(reducer.ratios[layer][:, row - start], expected, atol=1e-5, rtol=1e-4)


@torch.no_grad()
def test_peak_superiority_equals_brute_force():
    model = tiny_model("mistral")  # a sliding window hides far context from late rows
    ids = torch.randint(3, 128, (1, 14))
    context_keys, start = torch.tensor([2, 3, 4, 6, 7]), 9
    reducer, store = PeakSuperiorityReducer(context_keys, start), LogitStore()

    def both(logits, step):
        reducer(logits, step)
        store(logits, step)

    with LogitCapture(model, both, query_positions=slice(start, None)):
        model(ids)
    for layer, [(logits, step)] in store.steps.items():
        visible = step.visible[0]
        for head in range(logits.shape[1]):
            y = [float(logits[0, head, r, k]) for r in range(5) for k in range(start, 14) if visible[r, k]]
            for row in range(5):
                seen = [float(logits[0, head, row, k]) for k in context_keys.tolist() if visible[row, k]]
                expected = sum(v < max(seen) for v in y) / len(y) if seen else 0.0
                assert reducer.scores[layer][head, row].item() == pytest.approx(expected)
