"""The context-relevance benchmark's pieces: the pairs, the lookback ratio against eager attention, the AUROC."""

from __future__ import annotations

import copy
import json
import random

import pytest
import torch

from rcattr.attributor import RCAttributor
from rcattr.capture import LogitCapture, LogitStore
from rcattr.eval.groundedness.benchmark import SIGNALS, answer_signals, auroc_table, main, relevance_pairs
from rcattr.eval.groundedness.context_signals import LookbackReducer, PeakSuperiorityReducer
from rcattr.eval.kv import data as kv_data
from rcattr.prompting import ContextInput
from rcattr.selectors import TopHeads
from tests.helpers import char_tokenizer, tiny_model

ARTICLES = [
    {
        "paragraphs": [
            {
                "context": f"Article {a} paragraph {p}.",
                "qas": [
                    {"id": f"{a}-{p}-{q}", "question": f"Q{q}?", "is_impossible": q == 2} for q in range(3)
                ],
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
        article = pair.id.split("-")[0]
        assert pair.own == f"Article {article} paragraph {pair.id.split('-')[1]}."
        assert pair.other.startswith("Article ") and not pair.other.startswith(f"Article {article} ")
    assert relevance_pairs(limit=3) == pairs[:3]
    assert relevance_pairs(seed=0) == pairs
    assert any(a.other != b.other for a, b in zip(relevance_pairs(seed=1), pairs, strict=True))


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
    assert results["context_relevance"]["random"]["questions"] == 4


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
        for condition, separated in (("own", 1.0), ("other", 0.0)):
            row = dict.fromkeys(SIGNALS, 0.5)
            row.update(rc_context_heads=separated + i, logprob=-separated, lookback=0.3 + 0.1 * (i % 2))
            rows.append({"id": f"q{i}", "condition": condition, **row})
    rows.append({"id": "unpaired", "condition": "own", **dict.fromkeys(SIGNALS, 9.0)})
    table = auroc_table(rows, n_boot=200)
    assert table["rc_context_heads"]["questions"] == 6
    # own 1 + i beats other j when j <= i (21 of 36 pairs) and ties it when j = i + 1 (5)
    assert table["rc_context_heads"]["auroc"] == pytest.approx((21 + 0.5 * 5) / 36)
    assert table["logprob"]["auroc"] == 0.0  # always lower for the own paragraph
    assert table["lookback"]["auroc"] == 0.5  # the same values in both conditions
    assert table["random"]["auroc"] == 0.5  # every value tied
    low, high = table["logprob"]["low"], table["logprob"]["high"]
    assert low == high == 0.0
    assert (
        table["rc_context_heads"]["low"]
        <= table["rc_context_heads"]["auroc"]
        <= table["rc_context_heads"]["high"]
    )


@torch.no_grad()
def test_answer_signals_are_finite_and_bounded():
    attributor = RCAttributor(tiny_model("llama"), char_tokenizer(), TopHeads(3))
    row = answer_signals(
        attributor,
        "Cats sit. Dogs run.",
        "Who sits?",
        {"max_new_tokens": 4, "do_sample": False},
        random.Random(0),
    )
    assert set(SIGNALS) <= set(row) and isinstance(row["answer"], str)
    for name in (
        "rc_context_heads",
        "rc_superiority",
        "rc_selected",
        "rc_groundedness",
        "lookback",
        "lookback_rc",
        "random",
    ):
        assert 0.0 <= row[name] <= 1.0, name
    assert row["logprob"] <= 0.0 and row["neg_entropy"] <= 0.0


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
def test_context_reliance_equals_brute_force_groundedness():
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
    assert result.context_reliance == pytest.approx(expected.mean().item(), abs=1e-5)
