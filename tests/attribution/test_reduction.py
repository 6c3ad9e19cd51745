"""The per-layer reduction of one pass (rcattr.attribution.reduction): an example's layout, and per-layer tables."""

from __future__ import annotations

import pytest
import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.reduction import Layout, Reduction, forward, forward_batch
from rcattr.baselines import RandomAttributor
from rcattr.text.prompting import ContextInput
from tests.helpers import char_tokenizer, tiny_model
from tests.helpers.attribution import ANSWER, INPUT

pytestmark = pytest.mark.transformers_line


def test_the_layout_indexes_the_examples_context_and_answer_rows(llama, tokenizer) -> None:
    example = RandomAttributor(llama, tokenizer).prepare(INPUT, ANSWER, "chunk", "sentence")
    layout = Layout.of(example)
    context = sorted({token for tokens in example.context_ranges for token in tokens})
    assert layout.context_keys.tolist() == context and layout.n_answer == example.n_answer
    for unit, rows in enumerate(example.unit_ranges):
        assert layout.unit_rows[unit][layout.unit_mask[unit]].tolist() == list(rows)
        assert layout.membership[unit].nonzero().flatten().tolist() == list(rows)
    assert set(layout.row_sentence.tolist()) <= {-1, 0, 1}


def _reduction() -> Reduction:
    """Two layers of 3 heads: heads 0 and 2 of layer 0 and head 1 of layer 1 scored."""
    return Reduction(
        head_scores={"rc": {0: torch.zeros(3), 1: torch.zeros(3)}},
        context_rc={0: torch.tensor([[1.0], [2.0]]), 1: torch.tensor([[3.0]])},
        scored={0: torch.tensor([0, 2]), 1: torch.tensor([1])},
    )


def test_gather_takes_the_rows_of_the_asked_heads_in_their_order() -> None:
    reduction = _reduction()
    gathered = reduction.gather(reduction.context_rc, torch.tensor([[1, 1], [0, 2], [0, 0]]))
    assert gathered.flatten().tolist() == [3.0, 2.0, 1.0]
    with pytest.raises(ValueError, match=r"head \(0, 1\) was not scored"):
        reduction.gather(reduction.context_rc, torch.tensor([[0, 1]]))


def test_spread_and_the_mask_put_the_scored_heads_in_place() -> None:
    reduction = _reduction()
    assert reduction.spread(reduction.context_rc, 3)[..., 0].tolist() == [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]
    assert reduction.scored_mask(3).tolist() == [[True, False, True], [False, True, False]]
    assert Reduction.stack({1: torch.ones(2), 0: torch.zeros(2)}).tolist() == [[0.0, 0.0], [1.0, 1.0]]


@pytest.mark.parametrize("arch", ["llama", "mistral", "qwen2", "gemma3"])
@pytest.mark.parametrize("batch", [False, True])
def test_each_layers_reach_is_the_share_of_answer_context_pairs_its_window_lets_it_see(arch, batch) -> None:
    """Brute force from the config: a sliding layer sees a key less than its window back, a full layer all."""
    model, tokenizer = tiny_model(arch), char_tokenizer()
    attributor = RCAttributor(model, tokenizer)
    example = attributor.prepare(INPUT, ANSWER)
    reducer = attributor._reducer(example, {})
    if batch:  # left-padded beside a shorter example: the same reach
        short = attributor.prepare(ContextInput(["A cat."], "Who?"), "A cat.")
        forward_batch(model, [example, short], [reducer, attributor._reducer(short, {})])
    else:
        forward(model, example, reducer)
    config = model.config
    every = "sliding_attention" if getattr(config, "sliding_window", None) else "full_attention"
    kinds = getattr(config, "layer_types", None) or [every] * config.num_hidden_layers
    rows = torch.arange(example.answer_start, example.answer_start + example.n_answer)[:, None]
    keys = torch.tensor(sorted({token for tokens in example.context_ranges for token in tokens}))[None]
    for layer, kind in enumerate(kinds):
        seen = (rows - keys < config.sliding_window) if kind == "sliding_attention" else rows >= keys
        assert float(reducer.out.reach()[layer]) == pytest.approx(seen.double().mean().item()), (
            f"layer {layer}"
        )
    assert reducer.out.reach().shape == (config.num_hidden_layers,)
