"""The compress-once protocol's contexts (rcattr.eval.kv.contexts): joined paragraphs, several needles, one meeting."""

from __future__ import annotations

from rcattr.eval.kv.contexts import needle_contexts, spread, squad_contexts
from rcattr.eval.kv.data import KVRecord
from rcattr.eval.kv.needle import NEEDLE
from tests.helpers import PARAGRAPHS


def _words(text: str) -> int:
    return len(text.split())


def test_squad_contexts_join_paragraphs_to_the_budget_with_their_questions(data) -> None:
    (both,) = squad_contexts(_words, 200)
    assert both.context == "\n\n".join(PARAGRAPHS)
    assert [q.id for q in both.questions] == ["p0-a", "p1-a"]  # the unanswerable ones left out
    assert all(q.context == both.context for q in both.questions)
    one_each = squad_contexts(_words, 40)
    assert [c.context for c in one_each] == PARAGRAPHS and [c.id for c in one_each] == [
        "squad-0-0",
        "squad-0-1",
    ]
    assert squad_contexts(_words, 10) == []  # no paragraph fits
    assert len(squad_contexts(_words, 40, limit=1)) == 1


def test_spread_keeps_the_first_and_the_last() -> None:
    items = [KVRecord(str(i), "c", "q", ("a",)) for i in range(7)]
    assert [r.id for r in spread(items, 3)] == ["0", "3", "6"]
    assert spread(items, None) == items and spread(items[:2], 3) == items[:2]


def test_needle_contexts_hold_every_needle_once_with_one_question_each(data) -> None:
    contexts = needle_contexts(_words, 120, limit=2, needles=3)
    assert [c.id for c in contexts] == ["needle-120-0", "needle-120-1"]
    for context in contexts:
        assert len(context.questions) == 3 and _words(context.context) <= 120
        keys = [q.question.split(" for ")[1].split()[0] for q in context.questions]
        assert len(set(keys)) == 3
        for question, key in zip(context.questions, keys, strict=True):
            assert context.context.count(NEEDLE.format(key=key, value=question.answers[0])) == 1
        positions = [context.context.index(q.answers[0]) for q in context.questions]
        assert positions == sorted(positions)  # depths 0.1, 0.5, 0.9 in order
    assert needle_contexts(_words, 120, limit=2, needles=3) == contexts  # drawn from the seed
