"""The KV benchmark's data (rcattr.eval.kv.data): SQuAD and QMSum records, meeting excerpts around the gold turns."""

from __future__ import annotations

import json

import pytest

from rcattr.eval.common.datasets import data_dir
from rcattr.eval.kv.data import load_qmsum, load_squad, meeting_excerpt, turn_ranges


def _words(text: str) -> int:
    return len(text.split())


def test_meeting_excerpt_takes_the_gold_turns_then_their_neighbours() -> None:
    turns = [f"t{i} " + "w " * 3 for i in range(10)]  # 4 words each: 5 tokens with the newline
    excerpt = meeting_excerpt(turns, [(4, 5)], _words, budget=20)
    assert excerpt.split("\n") == [turns[3], turns[4], turns[5], turns[6]]
    assert meeting_excerpt(turns, [(4, 5)], _words, budget=24).split("\n") == turns[3:7]
    assert meeting_excerpt(turns, [(0, 0)], _words, budget=15).split("\n") == turns[0:3]
    # gold turns longer than the budget: the first ones that fit, then the beginning of one turn
    assert meeting_excerpt(turns, [(2, 8)], _words, budget=12).split("\n") == turns[2:4]
    assert meeting_excerpt(["a b c d e f"], [(0, 0)], _words, budget=4) == "a b c"
    with pytest.raises(ValueError, match="no turn"):
        meeting_excerpt(turns, [(20, 21)], _words, budget=10)
    with pytest.raises(ValueError, match="positive"):
        meeting_excerpt(turns, [(1, 1)], _words, budget=0)
    assert turn_ranges([["3", "7"], ["9", "9"]]) == [(3, 7), (9, 9)]


def test_squad_loader_takes_answerable_questions_with_their_paragraph() -> None:
    records = load_squad(limit=30)
    assert len(records) == 30 and len({r.id for r in records}) == 30
    for record in records:
        assert record.answers and all(answer for answer in record.answers)
        assert all(answer in record.context for answer in record.answers)
    assert records[0].question == "In what country is Normandy located?" and "France" in records[0].answers


def test_qmsum_loader_truncates_around_the_gold_turns() -> None:
    records = load_qmsum(_words, budget=400, limit=40)
    assert len(records) == 40
    assert len({r.id.rsplit("-", 1)[0] for r in records}) == 35  # round-robin: every meeting first
    meetings = [json.loads(line) for line in open(data_dir() / "qmsum" / "val.jsonl")]
    for record in records:
        assert sum(_words(line) + 1 for line in record.context.split("\n")) <= 400
        _, m, q = record.id.rsplit("-", 2)
        query = meetings[int(m)]["specific_query_list"][int(q)]
        first_gold = turn_ranges(query["relevant_text_span"])[0][0]
        turn = meetings[int(m)]["meeting_transcripts"][first_gold]
        assert f"{turn['speaker']}: {turn['content']}"[:40] in record.context or _words(turn["content"]) > 399
        assert record.answers == (query["answer"].strip(),)
