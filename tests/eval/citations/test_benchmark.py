"""The citation benchmark: its rows, its rule scores on hand-made lines, and a run on a tiny model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rcattr.eval.citations.cli import main
from rcattr.eval.citations.foreign import foreign_markdown, foreign_tables
from rcattr.eval.citations.rows import foreign_sentence, gold_documents, held_back
from rcattr.eval.citations.rules import VOUCHED, Rule, best, counts, evaluate, labelled, scores
from rcattr.eval.common.datasets import AttributionRecord, GoldSpan, load_quotesum
from rcattr.segmentation import TextSpan
from tests.helpers import data_folder


def _sentence(shares: list[float], gold: list[int], reliance: float = 0.5) -> dict:
    return {"shares": shares, "gold": gold, "reliance": reliance, "support": 0.5, "groundedness": 0.5}


LINES = [
    {
        "id": "a",
        "held_back": False,
        "sentences": [_sentence([0.7, 0.3, 0.0], [0]), _sentence([0.45, 0.55, 0.0], [0, 1])],
        "foreign": [_sentence([0.2, 0.1, 0.7], [], reliance=0.1)],
    },
    {"id": "b", "held_back": False, "sentences": [_sentence([0.1, 0.1, 0.8], [1])], "foreign": []},
]


def test_counts_and_scores_follow_their_definitions() -> None:
    top = counts(Rule(1.0, 1), LINES)
    # correct, cited, gold, sentences, foreign, foreign cited, foreign uncited
    assert top.tolist() == [[2, 2, 3, 2, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0]]
    precision, recall, withheld, f1 = scores(top.sum(0))
    assert (precision, recall, withheld) == (2 / 3, 2 / 4, 0.0)
    assert f1 == pytest.approx(2 * 2 / (3 + 4))
    two = counts(Rule(0.8, 2, signal="reliance", threshold=0.3), LINES).sum(0)
    assert two.tolist() == [3, 4, 4, 3, 1, 0, 1]  # (0.45 >= 0.8 x 0.55) cites both of sentence 2
    assert counts(Rule(0.2, 3, relative=False), LINES)[0].tolist()[:2] == [3, 4]


def test_the_best_rule_is_chosen_on_the_dev_part_only() -> None:
    # held back: a second document near the best one, never gold, which a one-document rule gets right
    near = [_sentence([0.5, 0.45, 0.05], [0]) for _ in range(10)]
    held = [{**line, "held_back": True, "sentences": near} for line in LINES]
    rules = [Rule(1.0, 1), Rule(0.8, 2), Rule(0.8, 2, signal="reliance", threshold=0.3)]
    assert best(rules, {"quotesum": LINES + held}) == Rule(0.8, 2)  # F1 0.75 against 0.57; ties: the first
    flipped = [{**line, "held_back": not line["held_back"]} for line in LINES + held]
    assert best(rules, {"quotesum": flipped}) == Rule(1.0, 1)


def test_only_labelled_sentences_count_where_a_file_marks_one_statement() -> None:
    lines = {"verigran": LINES, "quotesum": LINES}
    kept = labelled(
        {name: [{**LINES[0], "sentences": [*LINES[0]["sentences"], _sentence([1.0], [])]}] for name in lines}
    )
    assert len(kept["verigran"][0]["sentences"]) == 2 and len(kept["quotesum"][0]["sentences"]) == 3


def _vouched(sentence: dict, vouch: float, status: str) -> dict:
    claims = [["number", vouch > 0, 0.5]]
    return {
        **sentence,
        "vouch": vouch,
        "status": status,
        "claims": claims,
        "coverage": vouch,
        "logprob": -1.0,
        "neg_entropy": -1.0,
        "lookback": 0.5,
    }


def _vouched_lines() -> list[dict]:
    """LINES with each sentence vouched for: the answers' well (but one), the appended ones not."""
    return [
        {
            **line,
            "sentences": [
                _vouched(sentence, 0.9 if i else 0.3, "supported" if i else "weak")
                for i, sentence in enumerate(line["sentences"])
            ],
            "foreign": [_vouched(sentence, 0.0, "unsupported") for sentence in line["foreign"]],
        }
        for line in LINES
    ]


def test_the_library_s_rule_withholds_unsupported_sentences_only_on_vouched_rows() -> None:
    assert VOUCHED not in evaluate({"quotesum": LINES}, n_boot=20)["families"]
    results = evaluate({"quotesum": _vouched_lines()}, n_boot=20)
    vouched = results["families"][VOUCHED]
    assert (vouched["signal"], vouched["threshold"]) == ("vouch", 0.25)
    table = results["tables"]["quotesum/dev"][VOUCHED]
    assert table["foreign_uncited"][0] == 1.0 and table["f1_minus_chosen"][0] == 0.0


def test_appended_sentences_get_their_auroc_and_marked_shares() -> None:
    tables = foreign_tables({"quotesum": _vouched_lines()}, seed=0)
    table = tables["quotesum"]  # the record with an appended sentence: two answer sentences, one appended
    assert table["appended"] == {"weak": 0.0, "unsupported": 1.0, "sentences": 1}
    assert table["answers"] == {"weak": 0.5, "unsupported": 0.0, "sentences": 2}
    assert table["auroc"]["vouch"]["auroc"] == 1.0 and table["auroc"]["logprob"]["auroc"] == 0.5
    assert "100.0% marked of 1" in foreign_markdown(tables)
    assert foreign_tables({"quotesum": LINES}) == {}  # rows from before vouching


def _record(identifier: str, question: str, answer: str) -> AttributionRecord:
    return AttributionRecord(identifier, question, ["a"], answer, [GoldSpan(0, 3, answer[:3], 0)])


def test_rows_pieces() -> None:
    gold = [GoldSpan(0, 4, "abcd", 0), GoldSpan(10, 14, "klmn", 2), GoldSpan(12, 20, "mnopqrst", 1)]
    assert gold_documents(TextSpan(5, 13, "x" * 8), gold) == [1, 2]
    assert gold_documents(TextSpan(4, 10, "x" * 6), gold) == []
    pool = [
        _record("r1", "Q1?", "One. Two."),
        _record("r2", "Q2?", "Three. Four."),
        _record("r3", "Q1?", "Five."),
    ]
    drawn = foreign_sentence(pool[0], pool, seed=0)
    assert drawn in ("Three.", "Four.") and drawn == foreign_sentence(pool[0], pool, seed=0)
    assert held_back(pool[0]) == held_back(pool[2])  # one question, one part


def _quotesum_line(i: int) -> dict:
    return {
        "qid": f"q{i}",
        "unique_id": f"q{i}_0",
        "question": f"Who sat, {i}?",
        "summary": f"[ 1 The cat sat ] here. Then [ 2 dogs ran {i} ] away.",
        "title1": "Cats",
        "source1": "The cat sat on a mat.",
        "title2": "Dogs",
        "source2": f"Loud dogs ran {i} times.",
        **{f"{field}{slot}": "" for slot in range(3, 9) for field in ("title", "source")},
    }


@pytest.mark.slow
def test_a_run_writes_every_sentence_and_its_report_comes_back_from_the_rows(
    monkeypatch, saved_llama, tmp_path
) -> None:
    data_folder(
        tmp_path,
        monkeypatch,
        "quotesum/dev.jsonl",
        "".join(json.dumps(_quotesum_line(i)) + "\n" for i in range(6)),
    )
    out = tmp_path / "run"
    common = ["--datasets", "quotesum", "--out", str(out), "--model", str(saved_llama)]
    main(common)
    lines = [
        json.loads(line) for line in (out / "records" / "sentences-quotesum.jsonl").read_text().splitlines()
    ]
    records = load_quotesum()
    assert [line["id"] for line in lines] == [record.id for record in records]
    for line in lines:
        assert [s["gold"] for s in line["sentences"]] == [[0], [1]]
        assert all(np.isclose(sum(s["shares"]), 1, atol=1e-4) for s in line["sentences"])
    appended = [
        json.loads(line) for line in (out / "records" / "appended-quotesum.jsonl").read_text().splitlines()
    ]
    assert all(len(line["sentences"]) == 1 and line["sentences"][0]["gold"] == [] for line in appended)
    for line in lines + appended:
        for sentence in line["sentences"]:
            assert sentence["status"] in ("supported", "weak", "unsupported") and 0 <= sentence["vouch"] <= 1
            assert {"claims", "coverage", "logprob", "neg_entropy", "lookback"} <= set(sentence)
    results = json.loads((out / "results.json").read_text())
    assert results["appended"]["quotesum"]["appended"]["sentences"] == len(appended)
    assert results["tables"]["quotesum/dev"]["foreign"] == results["tables"]["quotesum/dev"]["records"]
    (out / "results.json").unlink()
    monkeypatch.setattr(
        "rcattr.models.load_model", lambda *args, **kwargs: pytest.fail("the model was loaded")
    )
    main([*common, "--report-only"])
    assert json.loads((out / "results.json").read_text()) == results
