"""The groundedness benchmark's pairs (rcattr.eval.groundedness.pairs): a supported and an unsupported condition
of each question, built from SQuAD-format articles."""

from __future__ import annotations

from rcattr.eval.groundedness.pairs import (
    TASKS,
    Answering,
    relevance_pairs,
    removed_sentence_pairs,
    unanswerable_pairs,
    without_answer_sentence,
)
from rcattr.eval.kv import data as kv_data
from tests.helpers import PAIRED_ARTICLES


def test_relevance_pairs_take_answerable_questions_and_another_articles_paragraph(monkeypatch):
    monkeypatch.setattr(kv_data, "squad_articles", lambda: PAIRED_ARTICLES)
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
    monkeypatch.setattr(kv_data, "squad_articles", lambda: PAIRED_ARTICLES)
    pairs = unanswerable_pairs()
    # one unanswerable question per paragraph: paired with the paragraph's first answerable one
    assert [pair.id for pair in pairs] == [f"{a}-{p}-0|{a}-{p}-2" for a in range(3) for p in range(2)]
    for pair in pairs:
        assert pair.supported.context == pair.unsupported.context
        assert (pair.supported.question, pair.unsupported.question) == ("Q0?", "Q2?")
    assert unanswerable_pairs(limit=2) == pairs[:2]


def test_removed_sentence_pairs_drop_the_sentence_that_holds_the_answer(monkeypatch):
    monkeypatch.setattr(kv_data, "squad_articles", lambda: PAIRED_ARTICLES)
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
