"""AT2 through its package (rcattr.baselines.at2): one head's attention, training, and what it refuses."""

from __future__ import annotations

import pytest
import torch

from rcattr.baselines import (
    AT2Attributor,
    RandomAttributor,
)
from rcattr.baselines.at2 import feature_extractor, train_estimator
from rcattr.baselines.peers import import_peer
from rcattr.text.prompting import ContextInput
from tests.helpers import tiny_model
from tests.helpers.attribution import ANSWER, BRACED_DOCUMENTS, BRACED_INPUT


def _one_hot_estimator(model, feature: int):
    at2 = import_peer("at2")
    estimator = at2.AT2ScoreEstimator(feature_extractor(model))
    estimator.linear.weight.data.zero_()
    estimator.linear.weight.data[0, feature] = 1.0
    return estimator


def test_at2_with_one_head_is_that_heads_attention_on_each_span(tokenizer) -> None:
    model = tiny_model("llama", attn_implementation="eager")
    example = RandomAttributor(model, tokenizer).prepare(BRACED_INPUT, ANSWER, "sentence", "sentence")
    heads = model.config.num_attention_heads
    with torch.no_grad():
        attentions = model(example.ids, output_attentions=True).attentions
    start, end = example.answer_start, example.ids.shape[1]
    for layer, head in ((0, 1), (2, 3)):
        result = AT2Attributor(model, tokenizer, _one_hot_estimator(model, layer * heads + head)).attribute(
            BRACED_INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
        )
        weights = attentions[layer][0, head, start - 1 : end - 1]  # the rows that predict the answer's tokens
        per_span = torch.stack([weights[:, r].sum(-1) for r in example.context_ranges], -1)  # [A, n_spans]
        torch.testing.assert_close(result.seq_attr, per_span.mean(0), atol=1e-5, rtol=1e-4)
        for unit, rows in zip(result.token_attr, example.unit_ranges, strict=True):
            torch.testing.assert_close(unit, per_span[rows.start : rows.stop].mean(0), atol=1e-5, rtol=1e-4)


def test_at2_trains_with_the_package_and_scores_from_the_saved_file(llama, tokenizer, tmp_path) -> None:
    inputs = [ContextInput(BRACED_DOCUMENTS, f"Question {i}?") for i in range(3)]
    estimators = train_estimator(
        llama, tokenizer, inputs, tmp_path, sizes=[2, 3], num_masks=4, num_iterations=5
    )
    assert set(estimators) == {2, 3}
    saved = tmp_path / "estimators" / "n3" / "score_estimator.pt"
    from_file = AT2Attributor(llama, tokenizer, saved).attribute(BRACED_INPUT, ANSWER, granularity="chunk")
    in_memory = AT2Attributor(llama, tokenizer, estimators[3]).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk"
    )
    assert from_file.seq_attr.shape == (3,)
    torch.testing.assert_close(from_file.seq_attr, in_memory.seq_attr)
    with pytest.raises(ValueError, match="training sizes"):
        train_estimator(llama, tokenizer, inputs, tmp_path / "other", sizes=[4])


def test_at2_refuses_what_its_package_cannot_read(tokenizer) -> None:
    with pytest.raises(ValueError, match="not 'gemma3_text'"):
        AT2Attributor(tiny_model("gemma3"), tokenizer, "unused.pt")
