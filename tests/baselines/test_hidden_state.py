"""The hidden-state baseline (rcattr.baselines.hidden_state) against brute force."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rcattr.baselines import (
    HiddenStateAttributor,
)
from rcattr.baselines.hidden_state import layer_output
from tests.helpers import tiny_model
from tests.helpers.attribution import ANSWER, BRACED_INPUT


def test_hidden_state_matches_brute_force(llama, tokenizer) -> None:
    attributor = HiddenStateAttributor(llama, tokenizer, layer=2)
    example = attributor.prepare(BRACED_INPUT, ANSWER, "chunk", "answer")
    result = attributor.attribute(BRACED_INPUT, ANSWER, granularity="chunk")
    with torch.no_grad():
        hidden = llama(example.ids, output_hidden_states=True).hidden_states[2][0]
    expected = torch.zeros(3)
    for row in range(example.answer_start, example.ids.shape[1]):
        best, best_span = -2.0, None
        for span, positions in enumerate(example.context_ranges):
            for position in positions:
                similarity = float(F.cosine_similarity(hidden[row], hidden[position], dim=0))
                if similarity > best:
                    best, best_span = similarity, span
        expected[best_span] += max(best, 0.0)
    torch.testing.assert_close(result.seq_attr, expected, atol=1e-4, rtol=1e-4)


def test_a_layers_output_is_read_without_running_the_layers_above(arch: str) -> None:
    model = tiny_model(arch)
    ids = torch.tensor([[5, 9, 2, 7, 11, 3, 8]])
    n_layers = model.config.get_text_config().num_hidden_layers
    with torch.no_grad():
        expected = model(ids, output_hidden_states=True).hidden_states
        above = model.get_decoder().layers[-1]
        ran = []
        hook = above.register_forward_hook(lambda *_: ran.append(True))
        try:
            for layer in range(1, n_layers + 1):
                torch.testing.assert_close(layer_output(model, ids, layer), expected[layer], atol=0, rtol=0)
        finally:
            hook.remove()
    assert len(ran) == 1  # only the last layer's read ran the last layer


def test_hidden_state_layer_out_of_range(llama, tokenizer) -> None:
    with pytest.raises(ValueError, match="layers 1..3"):
        HiddenStateAttributor(llama, tokenizer, layer=7)
