"""attribute_many: a left-padded batch gives what single attribute() calls give, on every architecture."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from captum.attr import TextTemplateInput, TextTokenInput
from transformers import AutoModelForCausalLM, GPT2Config

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.many import SkippedInputWarning
from rcattr.attribution.result import RCAttributionResult
from rcattr.baselines import BM25Attributor, RandomAttributor
from rcattr.eval.attribution.method import context_input, output_units
from rcattr.eval.attribution.recipes import RecipeAttributor, ablation
from rcattr.eval.common.datasets import load_quotesum
from rcattr.heads.selectors import TopHeads
from rcattr.runtime.models import load_model
from rcattr.text.prompting import ContextInput
from tests.default_methods import ATTRIBUTORS
from tests.helpers import ARCHITECTURES, char_tokenizer, tiny_model

# mixed lengths: contexts of one to three documents, questions, answers of one and of two sentences
INPUTS = [
    ContextInput(
        ["The cat sat. It purred.", "Dogs bark loudly.", "Birds fly south in May."], "What did the cat do?"
    ),
    ContextInput(["Rain falls. Snow too."], "Weather?"),
    ContextInput(
        ["A long text on things. It goes on.", "Short one."],
        "Which is long?",
    ),
]


TARGETS = ["It sat. Then it purred.", "Rain.", "The first. Not the short one."]


UNITS = [[(0, 7), (8, 23)], [(0, 4)], [(4, 9), (19, 28)]]  # character spans of each answer


FIELDS = (
    "seq_attr",
    "token_attr",
    "groundedness",
    "lookback",
    "token_logprob",
    "token_peak",
    "token_support",
)


def model_of(arch: str):
    """A tiny model of ``arch``, or of GPT-2 (``"gpt2"``): learned absolute positions, where a row's positions
    matter (RoPE logits depend on position differences only, so a shifted row would change them only by
    rounding)."""
    if arch != "gpt2":
        return tiny_model(arch)
    config = GPT2Config(
        vocab_size=128, n_embd=64, n_layer=3, n_head=4, n_positions=256, bos_token_id=1, eos_token_id=2
    )
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()


def assert_same(
    batched: list[RCAttributionResult], single: list[RCAttributionResult], atol: float = 1e-5
) -> None:
    """The results agree field by field within ``atol``, and have the same spans, answers and heads."""
    assert len(batched) == len(single)
    for many, one in zip(batched, single, strict=True):
        assert (many.answer, many.context_spans, many.output_spans) == (
            one.answer,
            one.context_spans,
            one.output_spans,
        )
        for name in FIELDS:
            got, expected = getattr(many, name), getattr(one, name)
            if expected is None:
                assert got is None, name
                continue
            torch.testing.assert_close(got, expected, atol=atol, rtol=0, msg=lambda m, n=name: f"{n}: {m}")
        if one.head_selection is None:
            assert many.head_selection is None
            continue
        assert many.head_selection is not None
        assert torch.equal(many.head_selection.heads, one.head_selection.heads)
        torch.testing.assert_close(many.head_selection.scores, one.head_selection.scores, atol=atol, rtol=0)
        assert many.lexical_share == pytest.approx(one.lexical_share, abs=atol)


def _forwards(model) -> tuple[list[tuple[int, ...]], Callable[[], None]]:
    """The input shape of each forward of ``model`` from now on, and the function that stops recording."""
    shapes: list[tuple[int, ...]] = []
    hook = model.register_forward_pre_hook(
        lambda _module, args, kwargs: shapes.append(tuple((args[0] if args else kwargs["input_ids"]).shape)),
        with_kwargs=True,
    )
    return shapes, hook.remove


@pytest.mark.parametrize(
    ("arch", "builder"),
    [
        *((arch, "default") for arch in [*ARCHITECTURES, "gpt2"]),
        *(
            (arch, builder)
            for arch in ("llama", "gemma3")
            for builder in sorted(ATTRIBUTORS)
            if builder != "default"
        ),
    ],
)
@pytest.mark.parametrize(
    ("granularity", "output_granularity"),
    [("chunk", "sentence"), ("sentence", "answer"), ("chunk", UNITS)],
    ids=["chunk-sentence", "sentence-answer", "chunk-own-spans"],
)
@pytest.mark.filterwarnings("ignore:no selected head sees the context")
def test_a_padded_batch_equals_single_calls(arch: str, builder: str, granularity, output_granularity) -> None:
    attributor = ATTRIBUTORS[builder](model_of(arch), char_tokenizer())
    units = output_granularity if isinstance(output_granularity, list) else [output_granularity] * len(INPUTS)
    single = [
        attributor.attribute(inp, target, granularity=granularity, output_granularity=unit)
        for inp, target, unit in zip(INPUTS, TARGETS, units, strict=True)
    ]
    shapes, stop = _forwards(attributor.model)
    try:
        batched = attributor.attribute_many(
            INPUTS, TARGETS, granularity=granularity, output_granularity=output_granularity, progress=False
        )
    finally:
        stop()
    longest = max(
        attributor.prepare(inp, target).ids.shape[1] for inp, target in zip(INPUTS, TARGETS, strict=True)
    )
    assert shapes == [(len(INPUTS), longest)]  # one forward, left-padded to the longest sequence
    assert_same(batched, single)


def _batch_sizes(attributor: RCAttributor, llama, **options: Any) -> list[int]:
    """The batch size of each forward of ``attribute_many(INPUTS, TARGETS, **options)``, its results checked
    against single calls."""
    single = [
        attributor.attribute(inp, target, granularity="chunk")
        for inp, target in zip(INPUTS, TARGETS, strict=True)
    ]
    shapes, stop = _forwards(llama)
    try:
        batched = attributor.attribute_many(INPUTS, TARGETS, granularity="chunk", progress=False, **options)
    finally:
        stop()
    assert_same(batched, single)
    return [shape[0] for shape in shapes]


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_every_batch_size_gives_the_same_results(llama, batch_size: int) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    assert _batch_sizes(attributor, llama, batch_size=batch_size) == [
        min(batch_size, len(INPUTS) - start) for start in range(0, len(INPUTS), batch_size)
    ]


def test_long_prompts_run_alone_within_the_token_budget(llama) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    prompts = [
        attributor.prepare(inp, target).answer_start for inp, target in zip(INPUTS, TARGETS, strict=True)
    ]
    budget = 2 * min(prompts) - 1  # no two prompts fit together: each batch is one input
    assert budget >= max(prompts)  # while the longest alone would
    assert _batch_sizes(attributor, llama, batch_size=8, max_batch_tokens=budget) == [1, 1, 1]


def test_captum_inputs_and_strings_mix_in_a_batch(llama) -> None:
    tokenizer = char_tokenizer()
    attributor = RCAttributor(llama, tokenizer, TopHeads(3))
    inputs = [
        TextTemplateInput("{} lives in {}, {}.", values=["Dave", "Palm Coast", "FL"], mask=[0, 1, 1]),
        INPUTS[0],
        TextTokenInput("Dave lives", tokenizer, skip_tokens=[" "]),
        "A context string. Two sentences.",
    ]
    targets = ["Florida", TARGETS[0], "Florida", "Two."]
    single = [attributor.attribute(inp, target) for inp, target in zip(inputs, targets, strict=True)]
    batched = attributor.attribute_many(inputs, targets, progress=False)
    assert [result.inp for result in batched] == [inputs[0], None, inputs[2], None]
    assert_same(batched, single)


@pytest.mark.parametrize("arch", ["llama", "gemma3", "qwen2"])
@pytest.mark.filterwarnings("ignore:no selected head sees the context")
def test_answers_generated_together_are_the_answers_generated_alone(arch: str) -> None:
    attributor = RCAttributor(tiny_model(arch), char_tokenizer(), TopHeads(3))
    gen_args = {"max_new_tokens": 10, "min_new_tokens": 3}
    targets = [None, TARGETS[1], None]
    single = [
        attributor.attribute(inp, target, gen_args=gen_args)
        for inp, target in zip(INPUTS, targets, strict=True)
    ]
    shapes, stop = _forwards(attributor.model)
    try:
        batched = attributor.attribute_many(INPUTS, targets, gen_args=gen_args, progress=False)
    finally:
        stop()
    assert shapes[0][0] == 2  # the two missing answers' prompts, generated in one batch
    assert batched[1].answer == TARGETS[1]
    assert_same(batched, single)


def test_generation_in_a_batch_is_capped_to_the_room_left_by_its_longest_prompt(llama) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    inputs = [ContextInput(["y" * 150]), ContextInput(["short"])]
    with pytest.warns(
        UserWarning, match="max_new_tokens=128 lowered to .*the longest prompt of the batch"
    ) as caught:
        results = attributor.attribute_many(inputs, gen_args={"min_new_tokens": 1}, progress=False)
    assert caught[0].filename == __file__  # the warning points at the call
    assert all(result.answer for result in results)


@pytest.mark.parametrize("baseline", [BM25Attributor, RandomAttributor])
def test_a_baseline_explains_a_batch_one_example_at_a_time(llama, baseline) -> None:
    attributor = baseline(llama, char_tokenizer())
    single = [
        attributor.attribute(inp, target, output_granularity="sentence")
        for inp, target in zip(INPUTS, TARGETS, strict=True)
    ]
    batched = attributor.attribute_many(
        INPUTS, TARGETS, batch_size=2, output_granularity="sentence", progress=False
    )
    assert_same(batched, single, atol=0.0)


def test_a_subclass_with_its_own_pass_runs_one_pass_per_example(llama) -> None:
    recipe = next(recipe for recipe in ablation() if recipe.name == "heads-vote+per-unit-heads")
    attributor = recipe.attributor(llama, char_tokenizer())
    assert isinstance(attributor, RecipeAttributor)
    single = [
        attributor.attribute(inp, target, output_granularity=units)
        for inp, target, units in zip(INPUTS, TARGETS, UNITS, strict=True)
    ]
    shapes, stop = _forwards(llama)
    try:
        batched = attributor.attribute_many(INPUTS, TARGETS, output_granularity=UNITS, progress=False)
    finally:
        stop()
    assert [shape[0] for shape in shapes] == [1, 1, 1]
    assert_same(batched, single)


def test_a_sequence_beyond_the_window_is_named_before_any_model_work(llama, monkeypatch) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    inputs = [INPUTS[0], INPUTS[1], ContextInput(["x" * 150])]
    targets = [TARGETS[0], None, "y" * 60]
    with pytest.raises(ValueError, match="exceeds the model's window") as single:
        attributor.attribute(inputs[2], targets[2])
    with monkeypatch.context() as patched:
        patched.setattr(
            llama, "forward", lambda *a, **k: pytest.fail("ran the model before checking every input")
        )
        with pytest.raises(ValueError, match="exceeds the model's window") as batched:
            attributor.attribute_many(inputs, targets, batch_size=1, progress=False)
    assert str(batched.value) == f"inputs[2]: {single.value}"


def test_skipped_inputs_are_none_and_named_while_the_others_finish(llama) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    inputs = [INPUTS[0], ContextInput(["x" * 150]), INPUTS[2], ContextInput(["   "])]
    targets = [TARGETS[0], "y" * 60, TARGETS[2], "Nothing."]
    with pytest.warns(UserWarning) as warned:
        results = attributor.attribute_many(inputs, targets, batch_size=2, errors="skip", progress=False)
    skips = sorted(str(w.message) for w in warned if "skipped" in str(w.message))
    assert [message.split(" skipped")[0] for message in skips] == ["inputs[1]", "inputs[3]"]
    assert "exceeds the model's window" in skips[0] and "the context is empty" in skips[1]
    assert results[1] is None and results[3] is None
    assert_same([results[0], results[2]], [attributor.attribute(inputs[i], targets[i]) for i in (0, 2)])
    with pytest.raises(ValueError, match="errors must be one of"):
        attributor.attribute_many(inputs, targets, errors="ignore", progress=False)  # type: ignore[call-overload]


def test_a_batch_that_fails_in_the_model_finds_its_input(llama, monkeypatch) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    explain_batch = attributor.explain_batch

    def fails_on_rain(examples, inputs):
        if any(example.answer == "Rain." for example in examples):
            raise RuntimeError("the model failed")
        return explain_batch(examples, inputs)

    monkeypatch.setattr(attributor, "explain_batch", fails_on_rain)
    with pytest.raises(RuntimeError, match=r"^inputs\[1\]: the model failed$"):
        attributor.attribute_many(INPUTS, TARGETS, batch_size=3, progress=False)
    with pytest.warns(
        SkippedInputWarning, match=r"inputs\[1\] skipped .*RuntimeError: the model failed"
    ) as warned:
        results = attributor.attribute_many(INPUTS, TARGETS, batch_size=3, errors="skip", progress=False)
    assert results[1] is None
    (skip,) = [warning.message for warning in warned if isinstance(warning.message, SkippedInputWarning)]
    assert (
        skip.index == 1 and str(skip.error) == "the model failed"
    )  # a caller answers input 1 with its error
    assert_same([results[0], results[2]], [attributor.attribute(INPUTS[i], TARGETS[i]) for i in (0, 2)])


def test_no_inputs_give_no_results(llama) -> None:
    assert RCAttributor(llama, char_tokenizer()).attribute_many([], progress=False) == []


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((INPUTS,), {"batch_size": 0}, ValueError, "batch_size must be a whole number >= 1, got 0"),
        ((INPUTS,), {"batch_size": 2.0}, ValueError, "batch_size must be a whole number >= 1, got 2.0"),
        ((INPUTS,), {"batch_size": True}, ValueError, "batch_size must be a whole number >= 1, got True"),
        (
            (INPUTS,),
            {"max_batch_tokens": 0},
            ValueError,
            "max_batch_tokens must be a whole number >= 1, got 0",
        ),
        ((INPUTS, TARGETS[:2]), {}, ValueError, "targets has 2 entries for 3 inputs"),
        (
            ("one context",),
            {},
            TypeError,
            "inputs must be a sequence .* got str; for a single example call attribute",
        ),
        ((INPUTS[:1], "It sat."), {}, TypeError, "targets must be a sequence .* got str"),
        (
            (INPUTS, TARGETS),
            {"output_granularity": UNITS[:2]},
            ValueError,
            "output_granularity gives 2 specs for 3 inputs",
        ),
        (
            (INPUTS, TARGETS),
            {"granularity": ["chunk"] * 4},
            ValueError,
            "granularity gives 4 specs for 3 inputs",
        ),
        ((INPUTS, [TARGETS[0], 3, None]), {}, TypeError, "target must be the answer string or None, got int"),
        (
            (INPUTS,),
            {"gen_args": {"num_return_sequences": 2, "num_beams": 2}},
            ValueError,
            "explains one answer",
        ),
        ((INPUTS, TARGETS), {"granularity": "word"}, ValueError, "unknown granularity 'word'"),
    ],
)
def test_bad_arguments_are_named(llama, monkeypatch, args, kwargs, error, message) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    monkeypatch.setattr(
        llama, "generate", lambda *a, **k: pytest.fail("generated before checking the arguments")
    )
    with pytest.raises(error, match=message):
        attributor.attribute_many(*args, progress=False, **kwargs)


@pytest.mark.real_model
def test_a_batch_of_quotesum_records_equals_single_calls_on_the_real_model() -> None:
    """Float64, so that rounding stays far below the tolerance and no near-tie of a count flips (in float32 a
    padded batch's kernels round differently from a single sequence's: docs/design.md §2)."""
    model, tokenizer = load_model(dtype=torch.float64)
    records = [load_quotesum(limit=4)[i] for i in (0, 1, 3)]  # 233, 245 and 557 tokens with their answers
    attributor = RCAttributor(model, tokenizer)
    inputs, targets = [context_input(r) for r in records], [r.answer for r in records]
    units = [output_units(r) for r in records]
    lengths = {
        attributor.prepare(inp, target).ids.shape[1] for inp, target in zip(inputs, targets, strict=True)
    }
    assert len(lengths) == len(records)  # mixed lengths: every row but the longest is padded
    single = [
        attributor.attribute(inp, target, granularity="chunk", output_granularity=unit)
        for inp, target, unit in zip(inputs, targets, units, strict=True)
    ]
    batched = attributor.attribute_many(
        inputs, targets, batch_size=4, granularity="chunk", output_granularity=units, progress=False
    )
    assert_same(batched, single)
