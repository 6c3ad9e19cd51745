"""The perturbation baselines (rcattr.baselines.perturbation): ablation, captum's Shapley sampling and Kernel
SHAP, each against what it must compute."""

from __future__ import annotations

import pytest
import torch

from rcattr.baselines import (
    AblationAttributor,
    KernelShapAttributor,
    RandomAttributor,
    ShapleySamplingAttributor,
)
from rcattr.baselines.perturbation import span_template
from rcattr.eval.attribution.faithfulness import answer_log_probs
from rcattr.text.prompting import ContextInput
from tests.helpers.attribution import ANSWER, BRACED_DOCUMENTS, BRACED_INPUT
from tests.reference import forward_log_probs


def test_ablation_is_the_log_prob_drop_of_removing_each_chunk(llama, tokenizer) -> None:
    result = AblationAttributor(llama, tokenizer).attribute(BRACED_INPUT, ANSWER, granularity="chunk")
    # Removing a chunk's text (captum's empty baseline) = the prompt with that chunk emptied; the char
    # tokenizer adds no special tokens, so captum's tokens are rcattr's.
    full = answer_log_probs(llama, tokenizer, BRACED_INPUT, ANSWER, torch.ones(1, 3, dtype=torch.bool))[0]
    example = AblationAttributor(llama, tokenizer).prepare(BRACED_INPUT, ANSWER, "chunk")
    template = span_template(example)
    answer_ids = example.ids[0, example.answer_start :]
    for index in range(3):
        values = [value if i != index else "" for i, value in enumerate(BRACED_DOCUMENTS)]
        ids = tokenizer(template.template.format(*values), add_special_tokens=False).input_ids
        sequence = torch.tensor([ids + answer_ids.tolist()])
        with torch.no_grad():
            log_probs = llama(sequence).logits[0].double().log_softmax(-1)
        ablated = sum(float(log_probs[len(ids) - 1 + j, t]) for j, t in enumerate(answer_ids.tolist()))
        assert float(result.seq_attr[index]) == pytest.approx(float(full) - ablated, abs=1e-3)


def test_span_template_escapes_braces_and_rejects_overlaps(llama, tokenizer) -> None:
    example = AblationAttributor(llama, tokenizer).prepare(BRACED_INPUT, ANSWER, "chunk")
    template = span_template(example)
    assert template.template.format(*BRACED_DOCUMENTS) == example.prompt.text
    overlapping = AblationAttributor(llama, tokenizer).prepare("abcdef", ANSWER, [(0, 3), (2, 5)])
    with pytest.raises(ValueError, match="non-overlapping"):
        span_template(overlapping)


@pytest.mark.parametrize("cls", [ShapleySamplingAttributor, KernelShapAttributor])
def test_sampling_methods_are_seeded_and_leave_the_global_generator_alone(llama, tokenizer, cls) -> None:
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    first = cls(llama, tokenizer, forwards=12, seed=1).attribute(
        BRACED_INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
    )
    assert torch.equal(torch.rand(1), before)  # the draws came from a forked generator
    again = cls(llama, tokenizer, forwards=12, seed=1).attribute(
        BRACED_INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
    )
    other = cls(llama, tokenizer, forwards=12, seed=2).attribute(
        BRACED_INPUT, ANSWER, granularity="sentence", output_granularity="sentence"
    )
    assert first.token_attr.shape == (2, 4) and first.seq_attr.shape == (4,)
    assert torch.equal(first.token_attr, again.token_attr)
    assert not torch.equal(first.seq_attr, other.seq_attr)


def test_shapley_sampling_of_two_spans_averages_their_marginal_gains(llama, tokenizer) -> None:
    # two chunks, two orders: each value is a mix of the span's two marginal gains, and they sum to full - empty
    inp = ContextInput(BRACED_DOCUMENTS[:2], "What did the cat do?")
    result = ShapleySamplingAttributor(llama, tokenizer, forwards=40).attribute(
        inp, ANSWER, granularity="chunk"
    )
    example = RandomAttributor(llama, tokenizer).prepare(inp, ANSWER, "chunk")
    template = span_template(example)
    answer_ids = example.ids[0, example.answer_start :].tolist()

    def value(keep: tuple[bool, bool]) -> float:
        values = [text if kept else "" for text, kept in zip(BRACED_DOCUMENTS[:2], keep, strict=True)]
        prompt_ids = tokenizer(template.template.format(*values), add_special_tokens=False)["input_ids"]
        return float(forward_log_probs(llama, prompt_ids, answer_ids).sum())

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
        BRACED_INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    assert torch.equal(result.token_attr[0], result.seq_attr) and torch.equal(
        result.token_attr[1], result.seq_attr
    )


def test_sampling_budget_must_allow_a_draw(llama, tokenizer) -> None:
    with pytest.raises(ValueError, match="forwards must be at least 2"):
        ShapleySamplingAttributor(llama, tokenizer, forwards=1)
