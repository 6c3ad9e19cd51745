"""RCAttributor on tiny random models: exact against brute force, shapes, inputs and errors."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from captum.attr import LLMAttributionResult, TextTemplateInput, TextTokenInput
from transformers import AutoModelForCausalLM, BloomConfig

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.fusion import LexicalFusion
from rcattr.attribution.lexical import bm25_scores
from rcattr.attribution.reduction import Reduction
from rcattr.attribution.result import RCAttributionResult
from rcattr.attribution.scorers import AttentionScorer
from rcattr.eval.attribution.per_head import head_span_scores
from rcattr.eval.attribution.selection_rules import BottomHeads
from rcattr.heads.scores import min_heads, outlier_count
from rcattr.heads.selectors import FixedHeads, OutlierHeads, TopHeads, heads_for
from rcattr.runtime.capture import LogitCapture, LogitStore
from rcattr.text.prompting import ContextInput, render_prompt
from tests.default_methods import SPAN_SCORERS
from tests.helpers import ARCHITECTURES, char_tokenizer, tiny_configs, tiny_model
from tests.helpers.attribution import ANSWER, DOCUMENTS, INPUT, QUESTION, answer_ids, captured_logits


@pytest.mark.parametrize(
    ("scorer", "continuation"), [("rc", 0.0), ("attention", 0.0), ("attention", 0.8), ("attention", 0.3)]
)
def test_matches_brute_force_over_stored_logits(llama, scorer: str, continuation: float) -> None:
    tokenizer = char_tokenizer()
    span_scorer = (
        AttentionScorer(continuation=continuation) if scorer == "attention" else SPAN_SCORERS[scorer]
    )
    # "It" and "Then": units whose continuation runs on to the end of their own sentence only
    result = RCAttributor(
        llama, tokenizer, TopHeads(5), span_scorer=span_scorer, votes="mass", lexical=False
    ).attribute(INPUT, ANSWER, granularity="chunk", output_granularity=[(0, 2), (8, 12)])
    ids, start, offsets = answer_ids(tokenizer, ANSWER)
    store = captured_logits(llama, ids, start)
    prompt = render_prompt(tokenizer, INPUT)
    chunk_keys = [
        [t for t, (a, b) in enumerate(offsets) if a >= s and b <= s + len(c) and b > a]
        for c, s in zip(prompt.chunks, prompt.chunk_starts, strict=True)
    ]
    context = sorted(k for keys in chunk_keys for k in keys)
    answer_keys = list(range(start, len(ids)))
    units = [[0, 1], [8, 9, 10, 11]]  # "It" and "Then" as answer rows (one character each)
    sentences = [range(0, 7), range(8, 23)]  # "It sat." and "Then it purred."; row 7 is the space between
    assert [s.text for s in result.output_spans] == ["It", "Then"]

    def block_score(logits: torch.Tensor, rows: list[int], keys: list[int]) -> float:
        if scorer == "attention":  # the unit's rows weigh 1, the d-th row after its last one continuation**d
            sentence = next((s for s in sentences if rows[-1] in s), range(0))
            later = [r for r in range(rows[-1] + 1, len(answer_keys)) if r in sentence]
            row_weights = torch.tensor([1.0] * len(rows) + [continuation ** (r - rows[-1]) for r in later])
            weights = torch.softmax(
                logits[rows + later] / 4.0, -1
            )  # head_dim 16: scaling 1/4, causal via the store
            mass = weights[:, keys].sum(-1)
            return float((row_weights.double() * mass).sum() / row_weights.sum())
        x = [float(logits[r, k]) for r in rows for k in keys]
        y = [float(logits[r, a]) for r in rows for a in answer_keys if a <= start + r]
        return sum(max(a - b, 0) for a in x for b in y) / (len(x) * len(y))

    # the default head score P(X > Y) over every answer row, checked for the selected heads
    expected_rows = []
    for rows in [list(range(len(answer_keys))), *units]:
        totals = torch.zeros(3, dtype=torch.float64)
        for layer, head in result.head_selection.as_pairs():
            logits = store.layer(layer, fill=float("-inf"))[0][0, head]  # [A, S]
            for chunk, keys in enumerate(chunk_keys):
                totals[chunk] += block_score(logits, rows, keys)
        expected_rows.append(totals / totals.sum())
    torch.testing.assert_close(result.seq_attr, expected_rows[0].float())
    torch.testing.assert_close(result.token_attr, torch.stack(expected_rows[1:]).float())

    for layer, head in result.head_selection.as_pairs()[:2]:
        logits = store.layer(layer, fill=float("-inf"))[0][0, head]
        x = [float(logits[r, k]) for r in range(len(answer_keys)) for k in context]
        y = [float(logits[r, a]) for r in range(len(answer_keys)) for a in answer_keys if a <= start + r]
        superiority = sum(a > b for a in x for b in y) / (len(x) * len(y))
        assert result.head_selection.scores[layer, head].item() == pytest.approx(superiority, rel=1e-9)


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("scorer", SPAN_SCORERS)
@pytest.mark.filterwarnings("ignore:no selected head sees the context")
def test_every_architecture_and_scorer(arch: str, scorer: str) -> None:
    model = tiny_model(arch)
    result = RCAttributor(model, char_tokenizer(), TopHeads(4), span_scorer=SPAN_SCORERS[scorer]).attribute(
        INPUT, ANSWER, granularity="sentence", output_granularity="token"
    )
    assert isinstance(result, LLMAttributionResult) and isinstance(result, RCAttributionResult)
    assert result.input_tokens == [
        "The cat sat.",
        "It purred.",
        "Dogs bark loudly.",
        "Birds fly south in May.",
    ]
    assert result.token_attr is not None and result.token_attr.shape == (len(ANSWER), 4)
    if arch == "mistral":  # every layer has a 5-token window: no answer row sees the context
        assert result.seq_attr.tolist() == [0.0] * 4
    else:
        torch.testing.assert_close(result.seq_attr.sum(), torch.tensor(1.0))
        assert bool((result.seq_attr >= 0).all())
        seen = result.token_attr.sum(1)
        torch.testing.assert_close(seen[seen > 0], torch.ones(int((seen > 0).sum())))
    assert result.groundedness.shape == (len(ANSWER),)
    assert bool(((result.groundedness >= 0) & (result.groundedness <= 1)).all())
    assert result.head_selection.heads.shape == (4, 2)
    n = len(result.answer_tokens)
    for signal in (result.lookback, result.token_peak, result.token_support):
        assert signal.shape == (n,) and bool(((signal >= 0) & (signal <= 1)).all())
    assert result.token_logprob.shape == (n,) and bool((result.token_logprob <= 0).all())
    assert result.context_reliance == pytest.approx(result.lookback.double().mean().item())


def test_unsupported_tokens_are_the_non_blank_ones_below_the_threshold(llama) -> None:
    result = RCAttributor(llama, char_tokenizer(), TopHeads(3)).attribute(INPUT, "It sat. Dogs bark.")
    assert result.token_support is not None and result.token_support.shape == (len(result.answer_tokens),)
    assert bool(((result.token_support >= 0) & (result.token_support <= 1)).all())
    result.rc = replace(result.rc, token_support=torch.linspace(0, 1, len(result.answer_tokens)))
    expected = [
        i for i, t in enumerate(result.answer_tokens) if result.token_support[i] < 0.3 and t.text.strip()
    ]
    assert result.unsupported_tokens(0.3) == expected and 2 not in expected  # token 2 is the blank after "It"
    assert result.to_dict()["unsupported_tokens"] == result.unsupported_tokens()
    assert result.to_dict()["token_support"] == pytest.approx(result.token_support.tolist())


def test_unit_context_reliance_is_the_mean_lookback_of_each_units_tokens(llama) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    result = attributor.attribute(
        INPUT, "It sat. Dogs bark.", granularity="sentence", output_granularity="sentence"
    )
    assert result.lookback is not None and result.unit_context_reliance is not None
    assert len(result.unit_context_reliance) == len(result.output_spans) == 2
    for unit, span in enumerate(result.output_spans):
        inside = [i for i, token in enumerate(result.answer_tokens) if span.start <= token.start < span.end]
        assert inside, span
        assert result.unit_context_reliance[unit].item() == pytest.approx(
            result.lookback[inside].mean().item()
        )


@pytest.mark.parametrize("scorer", ["rc", "rc_bound", "attention"])
def test_batched_units_equal_units_scored_alone(llama, scorer: str) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3), span_scorer=SPAN_SCORERS[scorer])
    tokens = attributor.attribute(INPUT, ANSWER, granularity="sentence", output_granularity="token")
    sentences = attributor.attribute(INPUT, ANSWER, granularity="sentence", output_granularity="sentence")
    for unit, bounds in [(3, (3, 4)), (20, (20, 21))]:
        alone = attributor.attribute(INPUT, ANSWER, granularity="sentence", output_granularity=[bounds])
        torch.testing.assert_close(alone.token_attr[0], tokens.token_attr[unit])
    second = attributor.attribute(INPUT, ANSWER, granularity="sentence", output_granularity=[(8, 23)])
    torch.testing.assert_close(second.token_attr[0], sentences.token_attr[1])


def test_generated_and_given_answers_agree(llama) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    generated = attributor.attribute(INPUT, gen_args={"max_new_tokens": 12, "min_new_tokens": 12})
    given = attributor.attribute(INPUT, generated.answer)
    assert generated.answer
    # a given answer runs in one forward over prompt + answer, a generated one continues its generation
    # cache: the same logits up to float32 rounding
    for got, expected in [
        (generated.seq_attr, given.seq_attr),
        (generated.token_attr, given.token_attr),
        (generated.groundedness, given.groundedness),
        (generated.lookback, given.lookback),
        (generated.token_logprob, given.token_logprob),
        (generated.token_peak, given.token_peak),
        (generated.token_support, given.token_support),
    ]:
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_captum_inputs(llama) -> None:
    tokenizer = char_tokenizer()
    attributor = RCAttributor(llama, tokenizer, TopHeads(3))
    template = TextTemplateInput("{} lives in {}, {}.", values=["Dave", "Palm Coast", "FL"], mask=[0, 1, 1])
    result = attributor.attribute(template, "Florida")
    assert result.input_tokens == ["Dave", "Palm Coast FL"] and result.inp is template
    torch.testing.assert_close(result.seq_attr.sum(), torch.tensor(1.0))
    tokens = TextTokenInput("Dave lives", tokenizer, skip_tokens=[" "])
    result = attributor.attribute(tokens, "Florida")
    assert result.input_tokens == list("Davelives")


def test_a_captum_input_that_starts_with_a_feature_gets_a_token_in_front(llama) -> None:
    tokenizer = char_tokenizer()
    attributor = RCAttributor(llama, tokenizer, TopHeads(3))
    example = attributor.prepare(TextTokenInput("Dave lives", tokenizer), "Florida")
    assert example.ids[0, 0].item() == tokenizer.bos_token_id and len(example.context_ranges) == 10
    assert example.context_ranges[0] == [1] and all(0 not in r for r in example.context_ranges)
    marked = TextTokenInput("<bos>Dave lives", tokenizer, skip_tokens=["<bos>"])  # the same ids, said so
    torch.testing.assert_close(
        attributor.attribute(TextTokenInput("Dave lives", tokenizer), "Florida").seq_attr,
        attributor.attribute(marked, "Florida").seq_attr,
    )
    template = attributor.prepare(TextTemplateInput("{} lives in {}.", values=["Dave", "Paris"]), "France")
    assert template.ids[0, 0].item() == tokenizer.bos_token_id and template.context_ranges[0] == [1, 2, 3, 4]
    plain = attributor.prepare(INPUT, ANSWER)  # its template comes first: nothing added
    assert plain.ids[0, : plain.answer_start].tolist() == tokenizer(plain.prompt.text)["input_ids"]
    tokenizer.bos_token, tokenizer.eos_token = None, None
    with pytest.raises(ValueError, match="no BOS or EOS token"):
        attributor.prepare(TextTokenInput("Dave lives", tokenizer), "Florida")


@pytest.mark.parametrize("scorer", SPAN_SCORERS)
@pytest.mark.parametrize("granularity", ["chunk", "sentence", "token"])
def test_empty_retrieved_chunks_are_documents_that_score_zero(llama, scorer, granularity) -> None:
    chunks = [DOCUMENTS[0], "", DOCUMENTS[1], "  \t"]
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3), span_scorer=SPAN_SCORERS[scorer])
    with pytest.warns(UserWarning, match="context chunks 1, 3 are empty or only whitespace"):
        result = attributor.attribute(
            ContextInput(chunks, QUESTION), ANSWER, granularity=granularity, output_granularity="sentence"
        )
    shares = result.document_scores(None)
    assert len(result.documents) == 4 and shares[1] == shares[3] == 0.0
    assert torch.isfinite(result.seq_attr).all() and shares[0] + shares[2] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="the context is empty"):
        attributor.attribute(ContextInput(["", " "], QUESTION), ANSWER)


def test_fixed_heads_and_head_scores(llama) -> None:
    tokenizer = char_tokenizer()
    scores = RCAttributor(llama, tokenizer, TopHeads(4)).head_scores(INPUT, ANSWER)
    assert scores.shape == (3, 4)
    fixed = RCAttributor(llama, tokenizer, FixedHeads([(2, 1)])).attribute(INPUT, ANSWER)
    assert fixed.head_selection.as_pairs() == [(2, 1)] and fixed.head_selection.kind == "fixed"


def test_result_table_and_top(llama) -> None:
    result = RCAttributor(llama, char_tokenizer(), TopHeads(3)).attribute(INPUT, ANSWER, granularity="chunk")
    table = result.to_dataframe()
    assert list(table.columns) == ["score", "document", "source", "start", "end", "text"]
    assert table["score"].is_monotonic_decreasing and sorted(table["document"]) == [1, 2, 3]
    with pytest.warns(DeprecationWarning, match="the table's `source` column .* goes in rcattr 0.3.0"):
        assert (table["document"] == table["source"] + 1).all()
    best, score = result.top(1)[0]
    assert best.text == DOCUMENTS[best.source] and score == pytest.approx(float(result.seq_attr.max()))
    with pytest.raises(IndexError, match="1 output units"):
        result.top(1, output=3)
    assert len(result.top(None)) == len(result.top(99)) == 3
    for k in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="k must be a whole number >= 1"):
            result.top(k)


def test_identical_documents_keep_their_own_scores(llama) -> None:
    twice = ContextInput(["The cat sat.", "A dog ran.", "The cat sat."], QUESTION)
    result = RCAttributor(llama, char_tokenizer(), TopHeads(3)).attribute(twice, ANSWER, granularity="chunk")
    scores = result.seq_attr_dict
    assert list(scores) == ["The cat sat. [doc 1]", "A dog ran.", "The cat sat. [doc 3]"]
    assert list(scores.values()) == result.seq_attr.tolist()


def test_to_dict_is_json_and_notebooks_get_escaped_html(llama) -> None:

    inp = ContextInput(["<script>alert(1)</script> The cat sat.", "A dog ran."], QUESTION)
    result = RCAttributor(llama, char_tokenizer(), TopHeads(3)).attribute(
        inp, ANSWER, output_granularity="sentence"
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert data["answer"] == ANSWER and data["seq_attr"] == pytest.approx(result.seq_attr.tolist())
    assert len(data["token_attr"]) == 2 and data["context_spans"][0]["document"] == 1
    assert data["heads"]["kind"] == "superiority" and len(data["heads"]["selected"]) == 3
    page = result._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page and "Then it purred." in page


def test_captum_plots_get_short_labels(llama) -> None:
    import matplotlib

    matplotlib.use("Agg")
    long_docs = ContextInput(["word " * 8, "other " * 7], QUESTION)
    result = RCAttributor(llama, char_tokenizer(), TopHeads(3)).attribute(
        long_docs, ANSWER, granularity="chunk"
    )
    figure, axes = result.plot_seq_attr()
    labels = [label.get_text() for label in axes.get_xticklabels()]
    assert [label[:8] for label in labels] == ["[1] word", "[2] othe"]
    assert all(len(label) <= 30 and label.endswith("…") for label in labels)
    assert result.input_tokens == [
        span.text for span in result.context_spans
    ]  # captum's own fields unchanged
    figure, axes = result.plot_token_attr()
    assert all(len(label.get_text()) <= 30 for label in axes.get_xticklabels() + axes.get_yticklabels())
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize(
    ("inp", "target", "kwargs", "error", "message"),
    [
        (ContextInput(""), "a", {}, ValueError, "context is empty"),
        (INPUT, "  ", {}, ValueError, "target is empty"),
        (INPUT, "x" * 300, {}, ValueError, "exceeds the model's window of 256"),
        ("one context", "a", {"granularity": [(0, 50)]}, ValueError, "0 <= start < end <= 11"),
        (INPUT, "abc", {"output_granularity": [(2, 9)]}, ValueError, "0 <= start < end <= 3"),
        (INPUT, "a", {"granularity": [(0, 3)]}, ValueError, "single context string"),
        (INPUT, "a", {"granularity": "word"}, ValueError, "unknown granularity 'word'"),
        (INPUT, "a", {"output_granularity": "paragraph"}, ValueError, "unknown output_granularity"),
        (INPUT, 3, {}, TypeError, "target must be the answer string"),
        ("one context", "a", {"granularity": []}, ValueError, "granularity: give at least one"),
        (INPUT, "abc", {"output_granularity": []}, ValueError, "output_granularity: give at least one"),
        ("one context", "a", {"granularity": [(0, 2, 3)]}, ValueError, "not a .start, end. pair"),
        (ContextInput(["x" * 300]), None, {}, ValueError, "leaves no room for an answer"),
        ("one context", "a", {"granularity": (0, 10)}, ValueError, r"^granularity: \(0, 10\) is one span"),
        (
            INPUT,
            "abc",
            {"output_granularity": (0, 2)},
            ValueError,
            r"^output_granularity: \(0, 2\) is one span",
        ),
        (INPUT, "Par\x00is", {}, ValueError, r"target contains a NUL character \(\\x00\) at character 3"),
        (
            INPUT,
            "Par\udcffis",
            {},
            ValueError,
            r"target contains a lone surrogate \('\\udcff'\) at character 3",
        ),
        *(
            (
                INPUT,
                None,
                {"gen_args": {"num_return_sequences": 2, **options}},
                ValueError,
                "explains one answer",
            )
            for options in ({"do_sample": True}, {"num_beams": 2})
        ),
    ],
)
def test_bad_input_is_named(llama, inp, target, kwargs, error, message) -> None:
    with pytest.raises(error, match=message):
        RCAttributor(llama, char_tokenizer(), TopHeads(4)).attribute(inp, target, **kwargs)


def test_bad_configuration_is_named(llama) -> None:
    tokenizer = char_tokenizer()
    for name in ("grad", "rc"):  # names are not scorers; the paper's RC scorers are the benchmark's
        with pytest.raises(ValueError, match=f"span_scorer='{name}': give a SpanScorer"):
            RCAttributor(llama, tokenizer, span_scorer=name)
    with pytest.raises(ValueError, match="unknown head_score"):
        RCAttributor(llama, tokenizer, OutlierHeads(score="max"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_k=0"):
        RCAttributor(llama, tokenizer, TopHeads(0))
    with pytest.warns(UserWarning, match="has 12 heads; using all of them"):
        assert RCAttributor(llama, tokenizer, TopHeads(13)).heads == TopHeads(12)
    with pytest.raises(ValueError, match="does not exist"):
        RCAttributor(llama, tokenizer, FixedHeads([(3, 0)]))


def test_too_long_a_prompt_is_refused_before_generating(llama, monkeypatch) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(4))
    monkeypatch.setattr(
        llama, "generate", lambda *a, **k: pytest.fail("generated before checking the window")
    )
    with pytest.raises(ValueError, match="leaves no room"):
        attributor.attribute(ContextInput(["x" * 300]))


def test_check_input_refuses_what_attribute_refuses_without_the_model(llama, monkeypatch) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(4))
    prompt_tokens = len(attributor.prepare(INPUT, ANSWER).ids[0]) - len(
        attributor.tokenizer(ANSWER)["input_ids"]
    )
    monkeypatch.setattr(llama, "forward", lambda *a, **k: pytest.fail("ran the model to check an input"))
    assert attributor.check_input(INPUT, ANSWER) == prompt_tokens
    for inp, target, message in (
        (ContextInput(["x" * 300]), None, "leaves no room"),
        (INPUT, "y" * 300, "exceeds the model's window"),
        (ContextInput(["   "]), None, "the context is empty"),
        (INPUT, "  ", "target is empty"),
    ):
        with pytest.raises(ValueError, match=message):
            attributor.check_input(inp, target)
    with pytest.raises(ValueError, match="unknown output_granularity"):
        attributor.check_input(INPUT, ANSWER, output_granularity="word")


def test_top_k_true_is_not_one_head(llama) -> None:
    with pytest.raises(ValueError, match="top_k=True"):
        RCAttributor(llama, char_tokenizer(), TopHeads(True))


def test_unsupported_model_is_named() -> None:
    bloom = AutoModelForCausalLM.from_config(BloomConfig(vocab_size=128, hidden_size=32, n_layer=1, n_head=2))
    with pytest.raises(NotImplementedError, match="BloomForCausalLM"):
        RCAttributor(bloom, char_tokenizer())


def test_a_swapped_model_and_tokenizer_are_named_before_transformers_fails(llama) -> None:
    with pytest.raises(TypeError, match=r"look swapped: call RCAttributor\(model, tokenizer\)"):
        RCAttributor(char_tokenizer(), llama)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model must be a transformers model .*, got str"):
        RCAttributor("HuggingFaceTB/SmolLM2-135M-Instruct", char_tokenizer())  # type: ignore[arg-type]


def test_paper_preset_and_the_default_recipe(llama) -> None:
    tokenizer = char_tokenizer()
    with pytest.warns(UserWarning, match="has 12 heads"):
        paper = RCAttributor.paper(llama, tokenizer)
    assert (paper.heads, paper.votes) == (TopHeads(12), "mass")  # 20 capped at 12 heads
    assert isinstance(paper.scorer, AttentionScorer) and paper.scorer.continuation == 0.0
    default = RCAttributor(llama, tokenizer)
    assert (default.heads, default.votes) == (OutlierHeads(), "share")
    assert isinstance(default.voting, LexicalFusion) and not isinstance(paper.voting, LexicalFusion)
    assert isinstance(default.scorer, AttentionScorer) and default.scorer.continuation == 0.8
    assert RCAttributor.paper(llama, tokenizer, heads=TopHeads(3)).heads == TopHeads(3)
    explicit = RCAttributor(
        llama,
        tokenizer,
        TopHeads(12),
        span_scorer=AttentionScorer(continuation=0.0),
        votes="mass",
        lexical=False,
    ).attribute(INPUT, ANSWER, granularity="chunk", output_granularity="sentence")
    preset = paper.attribute(INPUT, ANSWER, granularity="chunk", output_granularity="sentence")
    torch.testing.assert_close(preset.token_attr, explicit.token_attr)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"votes": "vote"}, "unknown votes"),
        ({"heads": 3}, "give a HeadSelector"),
    ],
)
def test_bad_options_are_named(llama, options, message) -> None:
    with pytest.raises(ValueError, match=message):
        RCAttributor(llama, char_tokenizer(), **options)
    with pytest.raises(ValueError, match="'outliers'"):
        heads_for("some")  # type: ignore[arg-type]


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.filterwarnings("ignore:no selected head sees the context")
def test_a_generated_answer_is_explained_from_its_generation_cache_without_running_the_prompt_twice(
    arch: str,
) -> None:
    model = tiny_model(arch)
    attributor = RCAttributor(model, char_tokenizer(), TopHeads(3))
    prompt_tokens = len(attributor.prepare(INPUT, ANSWER).ids[0]) - len(ANSWER)
    processed: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda _module, args, kwargs: processed.append((args[0] if args else kwargs["input_ids"]).shape[1]),
        with_kwargs=True,
    )
    try:
        generated = attributor.attribute(INPUT, gen_args={"max_new_tokens": 8, "min_new_tokens": 8})
    finally:
        hook.remove()
    answer_tokens = len(generated.answer_tokens)
    # generate: the prompt once, then one token per step; then the answer's own rows and the prompt's last
    # one again (it predicts the first answer token, for the token log-probabilities)
    assert processed == [prompt_tokens] + [1] * 7 + [answer_tokens + 1]
    given = attributor.attribute(INPUT, generated.answer)
    for name in ("seq_attr", "token_attr", "groundedness", "lookback", "token_logprob", "token_support"):
        torch.testing.assert_close(getattr(generated, name), getattr(given, name), atol=1e-4, rtol=1e-4)


def test_the_outlier_selection_records_its_stand_outs_and_minimum(llama) -> None:
    result = RCAttributor(llama, char_tokenizer()).attribute(INPUT, "It sat. Dogs bark.")
    selection = result.head_selection
    scores = selection.scores
    assert selection.outliers == outlier_count(scores) and selection.minimum == min_heads(scores.numel())
    assert len(selection.heads) == max(selection.outliers, 1)
    assert selection.few_heads == (len(selection.heads) < selection.minimum)
    assert (
        RCAttributor(llama, char_tokenizer(), TopHeads(3)).attribute(INPUT, "It sat.").head_selection.outliers
        is None
    )


def test_the_default_pass_computes_only_what_it_uses(llama) -> None:
    """One head score, no per-unit head scores, no span scores until the selected heads are known."""
    attributor = RCAttributor(llama, char_tokenizer())
    reducer = attributor.run_pass(attributor.prepare(INPUT, ANSWER), {"attention": attributor.scorer})
    assert set(reducer.out.head_scores) == {"superiority"} and not reducer.out.scored
    selection = attributor.select_heads(reducer)
    attributor.span_scores(attributor.prepare(INPUT, ANSWER), reducer, selection)
    scored = {(layer, int(head)) for layer, heads in reducer.out.scored.items() for head in heads}
    assert scored == set(selection.as_pairs()) and set(reducer.out.answer_scores) == {"attention"}


@pytest.mark.parametrize("granularity", ["chunk", "sentence"])
def test_lexical_fills_the_share_of_the_vote_where_the_heads_disagree(llama, granularity) -> None:
    """Brute force: each unit's vote and each selected head's own top span, then BM25 by hand."""
    tokenizer = char_tokenizer()
    plain = RCAttributor(llama, tokenizer, TopHeads(5), lexical=False).attribute(
        INPUT, ANSWER, granularity=granularity, output_granularity="sentence"
    )
    fused = RCAttributor(llama, tokenizer, TopHeads(5)).attribute(  # the default
        INPUT, ANSWER, granularity=granularity, output_granularity="sentence"
    )
    heads = plain.head_selection.heads
    assert fused.head_selection.heads.tolist() == heads.tolist()
    example = RCAttributor(llama, tokenizer).prepare(INPUT, ANSWER, granularity, "sentence")
    lexical_answer, lexical_units = bm25_scores(example)
    per_head = head_span_scores(
        RCAttributor(llama, tokenizer, TopHeads(5)),
        INPUT,
        ANSWER,
        granularity=granularity,
        output_granularity="sentence",
    )
    layers, index = heads.unbind(1)
    own_tops = per_head.units["attention"][layers, index].argmax(-1)  # [k, U]
    agreement = (own_tops == plain.token_attr.argmax(-1)[None]).double().mean(0)  # [U]
    shares = lexical_units / lexical_units.sum(-1, keepdim=True).clamp_min(1e-30)
    # a unit with no word in common with any span keeps its vote
    gate = torch.where(lexical_units.sum(-1) > 0, agreement, 1.0)[:, None]
    expected = gate * plain.token_attr.double() + (1 - gate) * shares
    torch.testing.assert_close(
        fused.token_attr.double(), expected / expected.sum(-1, keepdim=True), atol=1e-6, rtol=1e-5
    )
    assert fused.lexical_share == pytest.approx(float((1 - agreement).mean()))
    assert "BM25 filled" in fused.head_selection.describe(fused.lexical_share)
    assert plain.lexical_share is None and "BM25" not in plain.head_selection.describe(plain.lexical_share)
    assert lexical_answer.shape == fused.seq_attr.shape
    if granularity == "chunk":  # the tiny model's five heads split on one sentence there
        assert fused.lexical_share == pytest.approx(0.5)


@torch.no_grad()
def test_groundedness_equals_brute_force(llama):
    """Per answer token j, on the selected heads: sum E[max(X - Y, 0)] / sum (E[max(X - Y, 0)] + E[max(Y - X, 0)]),
    X the row's context logits, Y every answer self logit Y(g, g), from the captured logits."""
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    inp, answer = ContextInput("Cats sit. Dogs run.", "Who sits?"), "Cats do."
    result = attributor.attribute(inp, target=answer, granularity="sentence")
    example = attributor.prepare(inp, target=answer, granularity="sentence")
    start, n = example.answer_start, example.ids.shape[1]
    context = sorted({t for r in example.context_ranges for t in r})
    store = LogitStore()
    with LogitCapture(attributor.model, store, query_positions=slice(start, None)):
        attributor.model(example.ids)
    towards_context, towards_answer = (
        torch.zeros(n - start, dtype=torch.float64),
        torch.zeros(n - start, dtype=torch.float64),
    )
    for layer, head in result.head_selection.heads.tolist():
        [(logits, step)] = store.steps[layer]
        rows, visible = logits[0, head].double(), step.visible[0]
        y = torch.stack([rows[r, k] for r in range(n - start) for k in range(start, n) if visible[r, k]])
        for j in range(n - start):
            x = rows[j, context][visible[j, context]]
            gap = x[:, None] - y[None, :]
            towards_context[j] += gap.clamp_min(0).mean()
            towards_answer[j] += (-gap).clamp_min(0).mean()
    expected = towards_context / (towards_context + towards_answer)
    torch.testing.assert_close(result.groundedness.double(), expected, atol=1e-5, rtol=1e-4)


class BlindAttributor(RCAttributor):
    """rcattr's selection before issue 60: every head ranked, those whose window misses the context too."""

    def select_heads(self, reducer):
        return self.heads.select(Reduction.stack(reducer.out.head_scores[self.head_score]))


def _windowed(arch: str, window: int):
    config = tiny_configs()[arch]
    config.sliding_window = window
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()


@pytest.mark.parametrize("arch", ["gemma3", "qwen2"])
@pytest.mark.parametrize("selector", [OutlierHeads(), TopHeads(3)])
def test_where_every_window_reaches_the_context_the_attribution_is_unchanged(arch, selector) -> None:
    model = _windowed(arch, 4096)
    new, old = (
        kind(model, char_tokenizer(), selector).attribute(INPUT, ANSWER)
        for kind in (RCAttributor, BlindAttributor)
    )
    assert new.head_selection.seeing == 12 and new.head_selection.reach_note() is None
    assert torch.equal(new.head_selection.heads, old.head_selection.heads)
    assert torch.equal(new.seq_attr, old.seq_attr) and torch.equal(new.token_attr, old.token_attr)


@pytest.mark.parametrize("arch", ["gemma3", "qwen2"])
@pytest.mark.parametrize("selector", [OutlierHeads(), TopHeads(3), BottomHeads(2)])
def test_heads_are_chosen_among_those_whose_window_reaches_the_context(arch, selector) -> None:
    """Windows of 5 tokens: only the full-attention layer sees the documents from the answer. The selection is
    the selector's own rule over that layer's heads alone, and the spans get exactly those heads' votes."""
    model, tokenizer = _windowed(arch, 5), char_tokenizer()
    full = tiny_configs()[arch].layer_types.index("full_attention")
    result = RCAttributor(model, tokenizer, selector).attribute(INPUT, ANSWER)
    selection = result.head_selection
    assert selection.reach.tolist()[full] == 1.0 and selection.seeing == 4
    assert {layer for layer, _ in selection.as_pairs()} == {full}
    scores = selection.scores[full : full + 1]  # the rule over the seeing layer alone
    assert [[full, head] for _, head in selector.select(scores).heads.tolist()] == selection.heads.tolist()
    fixed = RCAttributor(model, tokenizer, FixedHeads(selection.as_pairs())).attribute(INPUT, ANSWER)
    assert torch.equal(result.seq_attr, fixed.seq_attr) and torch.equal(result.token_attr, fixed.token_attr)
    assert "4 of the model's 12 heads see the whole context from the answer" in selection.describe()


def test_when_no_window_reaches_the_context_the_attribution_says_so() -> None:
    model = _windowed("mistral", 5)  # every layer slides
    with pytest.warns(UserWarning, match="no head sees the whole context from the answer") as warned:
        result = RCAttributor(model, char_tokenizer()).attribute(INPUT, ANSWER)
    assert result.head_selection.seeing == 0 and result.head_selection.few_seeing
    # the result keeps what it warned of (a service answers each request with its own)
    assert result.rc.notes[0] == result.head_selection.reach_note()
    assert set(result.rc.notes) <= {str(warning.message) for warning in warned}
    assert result.to_dict()["heads"]["seeing"] == 0
