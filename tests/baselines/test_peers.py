"""The field's tools on a tiny random model: captum's Shapley sampling and Kernel SHAP, ContextCite and AT2
through their packages, each against what it must compute."""

from __future__ import annotations

import pytest
import torch

from rcattr.baselines import (
    AT2Attributor,
    ContextCiteAttributor,
    KernelShapAttributor,
    RandomAttributor,
    ShapleySamplingAttributor,
)
from rcattr.baselines.at2 import feature_extractor, train_estimator
from rcattr.baselines.context_cite import _citer
from rcattr.baselines.peers import import_peer
from rcattr.baselines.perturbation import span_template
from rcattr.prompting import ContextInput
from tests.helpers import tiny_model

DOCUMENTS = ["The cat sat. It purred.", "Dogs bark {loudly}.", "Birds fly south in May."]
INPUT = ContextInput(DOCUMENTS, "What did the cat do?")
ANSWER = "It sat. Then it purred."


def _answer_log_probs(model, prompt_ids: list[int], answer_ids: list[int]) -> torch.Tensor:
    """log p of each answer token after ``prompt_ids``, by a plain forward: [A]."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + answer_ids])).logits[0].double()
    rows = logits[len(prompt_ids) - 1 : -1].log_softmax(-1)
    return rows[torch.arange(len(answer_ids)), torch.tensor(answer_ids)]


@pytest.mark.parametrize("cls", [ShapleySamplingAttributor, KernelShapAttributor])
def test_sampling_methods_are_seeded_and_leave_the_global_generator_alone(llama, tokenizer, cls) -> None:
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    first = cls(llama, tokenizer, forwards=12, seed=1).attribute(
        INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
    )
    assert torch.equal(torch.rand(1), before)  # the draws came from a forked generator
    again = cls(llama, tokenizer, forwards=12, seed=1).attribute(
        INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
    )
    other = cls(llama, tokenizer, forwards=12, seed=2).attribute(
        INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
    )
    assert first.token_attr.shape == (2, 4) and first.seq_attr.shape == (4,)
    assert torch.equal(first.token_attr, again.token_attr)
    assert not torch.equal(first.seq_attr, other.seq_attr)


def test_shapley_sampling_of_two_spans_averages_their_marginal_gains(llama, tokenizer) -> None:
    # two chunks, two orders: each value is a mix of the span's two marginal gains, and they sum to full - empty
    inp = ContextInput(DOCUMENTS[:2], "What did the cat do?")
    result = ShapleySamplingAttributor(llama, tokenizer, forwards=40).attribute(
        inp, ANSWER, granularity="chunk"
    )
    example = RandomAttributor(llama, tokenizer).prepare(inp, ANSWER, "chunk")
    template = span_template(example)
    answer_ids = example.ids[0, example.answer_start :].tolist()

    def value(keep: tuple[bool, bool]) -> float:
        values = [text if kept else "" for text, kept in zip(DOCUMENTS[:2], keep, strict=True)]
        prompt_ids = tokenizer(template.template.format(*values), add_special_tokens=False)["input_ids"]
        return float(_answer_log_probs(llama, prompt_ids, answer_ids).sum())

    full, first, second, empty = (
        value((True, True)),
        value((True, False)),
        value((False, True)),
        value((False, False)),
    )
    assert float(result.seq_attr.sum()) == pytest.approx(full - empty, abs=1e-3)
    for value_of, alone, after_other in (
        (result.seq_attr[0], first - empty, full - second),
        (result.seq_attr[1], second - empty, full - first),
    ):
        assert min(alone, after_other) - 1e-3 <= float(value_of) <= max(alone, after_other) + 1e-3


def test_kernel_shap_gives_every_unit_the_answers_scores(llama, tokenizer) -> None:
    result = KernelShapAttributor(llama, tokenizer, forwards=16).attribute(
        INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    assert torch.equal(result.token_attr[0], result.seq_attr) and torch.equal(
        result.token_attr[1], result.seq_attr
    )


def test_sampling_budget_must_allow_a_draw(llama, tokenizer) -> None:
    with pytest.raises(ValueError, match="forwards must be at least 2"):
        ShapleySamplingAttributor(llama, tokenizer, forwards=1)


def test_context_cite_scores_the_ablated_prompts_it_is_given(llama, tokenizer) -> None:
    """The package's partitioner holds rcattr's prompt with the spans as sources, and its ablation scores are
    the answer's logit-probabilities under the prompt with the masked spans removed."""
    example = RandomAttributor(llama, tokenizer).prepare(INPUT, ANSWER, "sentence")
    citer = _citer(import_peer("context_cite"), llama, tokenizer, example, {"num_ablations": 6})
    assert citer.partitioner.get_context() == example.prompt.text
    assert citer.sources == [span.text for span in example.context_spans]
    template = span_template(example)
    answer_ids = example.ids[0, example.answer_start :].tolist()
    masks, logit_probs = citer._masks, citer._logit_probs  # the package's ablations, [6, n_spans] and [6, A]
    assert masks.shape == (6, 4) and logit_probs.shape == (6, len(answer_ids))
    for mask, scores in zip(masks, logit_probs, strict=True):
        values = [span.text if kept else "" for span, kept in zip(example.context_spans, mask, strict=True)]
        prompt_ids = tokenizer(template.template.format(*values), add_special_tokens=False)["input_ids"]
        log_p = _answer_log_probs(llama, prompt_ids, answer_ids)
        logit = log_p - torch.log1p(-log_p.exp())
        torch.testing.assert_close(torch.as_tensor(scores).double(), logit, atol=2e-3, rtol=1e-3)


def test_context_cite_fits_one_surrogate_per_unit(llama, tokenizer) -> None:
    result = ContextCiteAttributor(llama, tokenizer, num_ablations=8).attribute(
        INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    again = ContextCiteAttributor(llama, tokenizer, num_ablations=8).attribute(
        INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    assert result.seq_attr.shape == (3,) and result.token_attr.shape == (2, 3)
    assert torch.equal(result.token_attr, again.token_attr)  # the package seeds its masks


def _one_hot_estimator(model, feature: int):
    at2 = import_peer("at2")
    estimator = at2.AT2ScoreEstimator(feature_extractor(model))
    estimator.linear.weight.data.zero_()
    estimator.linear.weight.data[0, feature] = 1.0
    return estimator


def test_at2_with_one_head_is_that_heads_attention_on_each_span(tokenizer) -> None:
    model = tiny_model("llama", attn_implementation="eager")
    example = RandomAttributor(model, tokenizer).prepare(INPUT, ANSWER, "sentence", "sentence")
    heads = model.config.num_attention_heads
    with torch.no_grad():
        attentions = model(example.ids, output_attentions=True).attentions
    start, end = example.answer_start, example.ids.shape[1]
    for layer, head in ((0, 1), (2, 3)):
        result = AT2Attributor(model, tokenizer, _one_hot_estimator(model, layer * heads + head)).attribute(
            INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
        )
        weights = attentions[layer][0, head, start - 1 : end - 1]  # the rows that predict the answer's tokens
        per_span = torch.stack([weights[:, r].sum(-1) for r in example.context_ranges], -1)  # [A, n_spans]
        torch.testing.assert_close(result.seq_attr, per_span.mean(0), atol=1e-5, rtol=1e-4)
        for unit, rows in zip(result.token_attr, example.unit_ranges, strict=True):
            torch.testing.assert_close(unit, per_span[rows.start : rows.stop].mean(0), atol=1e-5, rtol=1e-4)


def test_at2_trains_with_the_package_and_scores_from_the_saved_file(llama, tokenizer, tmp_path) -> None:
    inputs = [ContextInput(DOCUMENTS, f"Question {i}?") for i in range(3)]
    estimators = train_estimator(
        llama, tokenizer, inputs, tmp_path, sizes=[2, 3], num_masks=4, num_iterations=5
    )
    assert set(estimators) == {2, 3}
    saved = tmp_path / "estimators" / "n3" / "score_estimator.pt"
    from_file = AT2Attributor(llama, tokenizer, saved).attribute(INPUT, ANSWER, granularity="chunk")
    in_memory = AT2Attributor(llama, tokenizer, estimators[3]).attribute(INPUT, ANSWER, granularity="chunk")
    assert from_file.seq_attr.shape == (3,)
    torch.testing.assert_close(from_file.seq_attr, in_memory.seq_attr)
    with pytest.raises(ValueError, match="training sizes"):
        train_estimator(llama, tokenizer, inputs, tmp_path / "other", sizes=[4])


def test_at2_refuses_what_its_package_cannot_read(tokenizer) -> None:
    with pytest.raises(ValueError, match="not 'gemma3_text'"):
        AT2Attributor(tiny_model("gemma3"), tokenizer, "unused.pt")


def test_a_missing_peer_package_says_how_to_install_it() -> None:
    with pytest.raises(ImportError, match=r"rcattr\[peers\]"):
        import_peer("not_a_peer_package")
