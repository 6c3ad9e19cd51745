"""The answer-level groundedness benchmarks' pieces: the pairs, the lookback ratio against eager attention, the
AUROC, the signals."""

from __future__ import annotations

import copy
import json
import random

import pytest
import torch

from rcattr.attributor import RCAttributor
from rcattr.capture import LogitCapture, LogitStore
from rcattr.eval.groundedness.answer_level import ANSWER_SIGNALS, answer_signals, auroc_table
from rcattr.eval.groundedness.cli import main
from rcattr.eval.groundedness.context_signals import LookbackReducer, PeakSuperiorityReducer, token_signals
from rcattr.eval.groundedness.pairs import (
    TASKS,
    Answering,
    relevance_pairs,
    removed_sentence_pairs,
    unanswerable_pairs,
    without_answer_sentence,
)
from rcattr.eval.kv import data as kv_data
from rcattr.prompting import ContextInput
from rcattr.selectors import TopHeads
from tests.helpers import char_tokenizer, tiny_model


def _qa(a: int, p: int, q: int) -> dict:
    """Question q of paragraph p of article a: answerable ("paragraph p", in its first sentence) for q < 2."""
    answers = [] if q == 2 else [{"text": f"paragraph {p}", "answer_start": len(f"Article {a} ")}]
    return {"id": f"{a}-{p}-{q}", "question": f"Q{q}?", "is_impossible": q == 2, "answers": answers}


ARTICLES = [
    {
        "paragraphs": [
            {
                "context": f"Article {a} paragraph {p}. Its second sentence.",
                "qas": [_qa(a, p, q) for q in range(3)],
            }
            for p in range(2)
        ]
    }
    for a in range(3)
]


def test_relevance_pairs_take_answerable_questions_and_another_articles_paragraph(monkeypatch):
    monkeypatch.setattr(kv_data, "squad_articles", lambda: ARTICLES)
    pairs = relevance_pairs()
    assert [pair.id for pair in pairs] == [
        f"{a}-{p}-{q}" for a in range(3) for p in range(2) for q in range(2)
    ]
    for pair in pairs:
        article, paragraph = pair.id.split("-")[:2]
        assert pair.supported.context == f"Article {article} paragraph {paragraph}. Its second sentence."
        other = pair.unsupported.context
        assert other.startswith("Article ") and not other.startswith(f"Article {article} ")
        assert pair.supported.question == pair.unsupported.question
    assert relevance_pairs(limit=3) == pairs[:3]
    assert relevance_pairs(seed=0) == pairs
    assert any(a.unsupported != b.unsupported for a, b in zip(relevance_pairs(seed=1), pairs, strict=True))


def test_unanswerable_pairs_put_an_answerable_and_an_unanswerable_question_on_one_paragraph(monkeypatch):
    monkeypatch.setattr(kv_data, "squad_articles", lambda: ARTICLES)
    pairs = unanswerable_pairs()
    # one unanswerable question per paragraph: paired with the paragraph's first answerable one
    assert [pair.id for pair in pairs] == [f"{a}-{p}-0|{a}-{p}-2" for a in range(3) for p in range(2)]
    for pair in pairs:
        assert pair.supported.context == pair.unsupported.context
        assert (pair.supported.question, pair.unsupported.question) == ("Q0?", "Q2?")
    assert unanswerable_pairs(limit=2) == pairs[:2]


def test_removed_sentence_pairs_drop_the_sentence_that_holds_the_answer(monkeypatch):
    monkeypatch.setattr(kv_data, "squad_articles", lambda: ARTICLES)
    pairs = removed_sentence_pairs(limit=3)
    assert [pair.id for pair in pairs] == ["0-0-0", "0-0-1", "0-1-0"]
    assert pairs[0].supported.context == "Article 0 paragraph 0. Its second sentence."
    assert pairs[0].unsupported == Answering("Its second sentence.", "Q0?")


def test_without_answer_sentence_refuses_what_would_still_hold_the_answer():
    qa = {
        "answers": [{"text": "Paris", "answer_start": 13}, {"text": "the city of Paris", "answer_start": 0}]
    }
    assert without_answer_sentence("It lies in a Paris suburb. It is old.", qa) == "It is old."
    assert without_answer_sentence("It lies in a Paris suburb. Paris is old.", qa) is None  # said again
    assert without_answer_sentence("It lies in a Paris suburb.", qa) is None  # nothing would be left


def test_every_paired_task_names_its_supported_condition_first():
    assert TASKS["relevance"].conditions == ("own", "other")
    assert {name: task.conditions[0] for name, task in TASKS.items()} == {
        "relevance": "own",
        "unanswerable": "answerable",
        "removed": "full",
    }


@pytest.mark.slow
def test_report_only_rewrites_the_report_from_the_rows_without_the_model(monkeypatch, saved_llama, tmp_path):
    monkeypatch.setattr(kv_data, "squad_articles", lambda: ARTICLES)
    out = tmp_path / "run"
    common = ["--task", "relevance", "--limit", "4", "--max-new-tokens", "3", "--out", str(out)]
    main([*common, "--model", str(saved_llama)])
    results = json.loads((out / "results.json").read_text())
    (out / "results.json").unlink()
    monkeypatch.setattr(
        "rcattr.models.load_model", lambda *args, **kwargs: pytest.fail("the model was loaded")
    )
    main([*common, "--model", str(saved_llama), "--report-only"])
    assert json.loads((out / "results.json").read_text()) == results
    assert results["relevance"]["random"]["questions"] == 4


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


def test_auroc_table_on_hand_made_cases():
    rows = []
    for i in range(6):
        for condition, separated in (("answerable", 1.0), ("unanswerable", 0.0)):
            row = dict.fromkeys(ANSWER_SIGNALS, 0.5)
            row.update(rc_context_heads=separated + i, logprob=-separated, lookback=0.3 + 0.1 * (i % 2))
            rows.append({"id": f"q{i}", "condition": condition, **row})
    rows.append({"id": "unpaired", "condition": "answerable", **dict.fromkeys(ANSWER_SIGNALS, 9.0)})
    table = auroc_table(rows, ("answerable", "unanswerable"), n_boot=200)
    assert list(table) == list(ANSWER_SIGNALS)
    assert table["rc_context_heads"]["questions"] == 6
    # answerable 1 + i beats unanswerable j when j <= i (21 of 36 pairs) and ties it when j = i + 1 (5)
    assert table["rc_context_heads"]["auroc"] == pytest.approx((21 + 0.5 * 5) / 36)
    assert table["logprob"]["auroc"] == 0.0  # always lower for the supported answer
    assert table["lookback"]["auroc"] == 0.5  # the same values in both conditions
    assert table["random"]["auroc"] == 0.5  # every value tied
    low, high = table["logprob"]["low"], table["logprob"]["high"]
    assert low == high == 0.0
    assert (
        table["rc_context_heads"]["low"]
        <= table["rc_context_heads"]["auroc"]
        <= table["rc_context_heads"]["high"]
    )
    # the conditions' order says which is positive
    assert auroc_table(rows, ("unanswerable", "answerable"), n_boot=20)["logprob"]["auroc"] == 1.0


@torch.no_grad()
def test_answer_signals_are_finite_and_bounded_and_the_result_s_own():
    attributor = RCAttributor(tiny_model("llama"), char_tokenizer(), TopHeads(3))
    answering = Answering("Cats sit. Dogs run.", "Who sits?")
    gen_args = {"max_new_tokens": 4, "do_sample": False}
    row = answer_signals(attributor, answering, gen_args, random.Random(0))
    assert set(ANSWER_SIGNALS) <= set(row) and isinstance(row["answer"], str)
    for name in set(ANSWER_SIGNALS) - {"logprob", "neg_entropy"}:
        assert 0.0 <= row[name] <= 1.0, name
    assert row["logprob"] <= 0.0 and row["neg_entropy"] <= 0.0
    # context reliance is the lookback ratio on the RC-selected heads, as the benchmark computes it
    inp = ContextInput(answering.context, answering.question)
    result = attributor.attribute(inp, target=row["answer"], granularity="sentence")
    example = attributor.prepare(inp, target=row["answer"], granularity="sentence")
    heads = result.head_selection.heads
    tokens = token_signals(attributor.model, example, heads, heads)
    assert row["context_reliance"] == pytest.approx(float(tokens["lookback_rc"].mean()), abs=1e-5)


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


@torch.no_grad()
def test_groundedness_equals_brute_force():
    """Per answer token j, on the selected heads: sum E[max(X - Y, 0)] / sum (E[max(X - Y, 0)] + E[max(Y - X, 0)]),
    X the row's context logits, Y every answer self logit Y(g, g), from the captured logits."""
    attributor = RCAttributor(tiny_model("llama"), char_tokenizer(), TopHeads(3))
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
