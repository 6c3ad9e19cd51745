"""The natural-error benchmark: labels from the gold answers, the signals of a row, the AUROC tables, a run."""

from __future__ import annotations

import json

import pytest

from rcattr.eval.groundedness import natural_errors
from rcattr.eval.groundedness.cli import main
from rcattr.eval.groundedness.sentence_signals import SIGNALS, derived
from rcattr.eval.kv import data as kv_data


def test_token_f1_and_correctness_follow_squad() -> None:
    assert natural_errors.token_f1("The Eiffel Tower is 330 metres.", "330 metres") == (
        pytest.approx(4 / 7),
        1.0,
    )
    assert natural_errors.correctness("It is 330 metres tall.", ["330 metres", "330 m"]) == "right"
    assert natural_errors.correctness("It is 300 metres tall.", ["330 metres"]) == "partly"
    assert natural_errors.correctness("In Paris.", ["330 metres", "an 330"]) == "wrong"


ARTICLES = [
    {
        "paragraphs": [
            {
                "context": f"Tower {p} is {300 + p} metres tall. It opened in {1880 + p}.",
                "qas": [
                    {
                        "id": f"{p}-{q}",
                        "question": "How tall is it?" if q == 0 else "When did it open?",
                        "is_impossible": False,
                        "answers": [
                            {"text": f"{300 + p} metres" if q == 0 else f"{1880 + p}", "answer_start": 0}
                        ],
                    }
                    for q in range(2)
                ],
            }
            for p in range(4)
        ]
    }
]


RECORD = kv_data.KVRecord(
    "q", "Paris has a tower of 330 metres.", "How tall is the Paris tower?", ("330 metres",)
)


@pytest.mark.parametrize(
    ("claim", "kind", "answer", "expected"),
    [
        ("330", "number", "right", "right"),
        ("1889", "number", "right", None),  # a right answer's claim the gold answers lack
        ("300", "number", "wrong", "contradicted"),
        ("Lyon", "name", "wrong", None),  # the gold answers make no claim of that kind
        ("Paris", "name", "wrong", None),  # the question's own
        ("300", "number", "partly", None),
    ],
)
def test_claim_labels_come_from_the_gold_answers(
    claim: str, kind: str, answer: str, expected: str | None
) -> None:
    assert natural_errors.claim_label(claim, kind, answer, RECORD) == expected


def _sentence(vouch: float, support: float, claims: list) -> dict:
    return {
        "vouch": vouch,
        "support": support,
        "claims": claims,
        "coverage": 0.5,
        "logprob": -1.0,
        "neg_entropy": -2.0,
        "lookback": 0.3,
    }


def test_an_answer_is_as_strong_as_its_weakest_sentence() -> None:
    row = {
        "sentences": [
            _sentence(0.9, 0.9, [["number", True, 0.7]]),
            _sentence(0.2, 0.6, [["name", False, 0.05], ["number", True, None]]),
        ]
    }
    signals = natural_errors.answer_signals(row)
    assert set(signals) == set(SIGNALS)
    assert (signals["vouch"], signals["support"], signals["claims_held"], signals["claims_rc"]) == (
        0.2,
        0.6,
        0.0,
        0.05,
    )
    assert derived(_sentence(1.0, 1.0, []))["claims_rc"] == 1.0


@pytest.mark.slow
def test_an_errors_run_labels_its_rows_and_reports_from_them_without_the_model(
    monkeypatch, saved_llama, tmp_path
):
    monkeypatch.setattr(kv_data, "squad_articles", lambda: ARTICLES)
    out = tmp_path / "run"
    common = ["--task", "errors", "--limit", "5", "--max-new-tokens", "4", "--out", str(out)]
    main([*common, "--model", str(saved_llama)])
    rows = [json.loads(line) for line in (out / "records" / "errors.jsonl").read_text().splitlines()]
    assert len(rows) == 5 and all(row["sentences"] and "label" not in row for row in rows)
    for row in rows:
        for sentence in row["sentences"]:
            assert sentence["status"] in ("supported", "weak", "unsupported") and 0 <= sentence["vouch"] <= 1
    results = json.loads((out / "results.json").read_text())
    assert sum(results["natural_errors"]["labels"].values()) == 5
    (out / "results.json").unlink()
    monkeypatch.setattr(
        "rcattr.runtime.models.load_model", lambda *args, **kwargs: pytest.fail("the model was loaded")
    )
    main([*common, "--model", str(saved_llama), "--report-only"])
    assert json.loads((out / "results.json").read_text()) == results
