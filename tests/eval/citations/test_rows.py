"""The citation benchmark's row pieces (rcattr.eval.citations.rows): gold documents, foreign sentences, held-back."""

from __future__ import annotations

from rcattr.eval.citations.rows import foreign_sentence, gold_documents, held_back
from rcattr.eval.common.datasets import BenchmarkRecord, GoldSpan
from rcattr.text.segmentation import TextSpan


def _record(identifier: str, question: str, answer: str) -> BenchmarkRecord:
    return BenchmarkRecord(identifier, question, ["a"], answer, [GoldSpan(0, 3, answer[:3], 0)])


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
