"""The unsupported-tokens benchmark's edit generator: only quoted content is edited, every edit is recorded."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.eval.common.datasets import BenchmarkRecord, GoldSpan, data_dir, load_attribution
from rcattr.eval.groundedness.answer_edits import (
    EDIT_KINDS,
    MONTHS,
    candidates,
    edit_answers,
    edit_record,
    entity_pool,
)


def record(answer: str, quoted: list[str], chunks: list[str], id: str = "r") -> BenchmarkRecord:
    gold = []
    for text in quoted:
        start = answer.index(text)
        gold.append(GoldSpan(start, start + len(text), text, 0))
    return BenchmarkRecord(id, "Q?", chunks, answer, gold)


SOURCE = "In March 1916 the Oklahoma Legislature met in Guthrie with 101 members."
RECORD = record(
    "Oklahoma grew. In March 1916 the Oklahoma Legislature met in Guthrie with 101 members. Then Tulsa grew.",
    ["In March 1916 the Oklahoma Legislature met in Guthrie with 101 members."],
    [SOURCE],
)


def test_candidates_are_the_quoted_numbers_dates_and_entities_not_sentence_starts():
    found = [(c.kind, c.text) for c in candidates(RECORD)]
    assert found == [
        ("date", "March"),
        ("date", "1916"),
        ("entity", "Oklahoma Legislature"),
        ("entity", "Guthrie"),
        ("number", "101"),
    ]  # "In" starts a sentence; "Oklahoma grew" and "Tulsa" are not quoted


def test_edits_swap_quoted_values_for_absent_ones_and_record_them():
    pool = {1: ["Guthrie", "Norman", "Tulsa"], 2: ["Oklahoma Legislature", "Texas Senate"]}
    for seed in range(20):
        edited = edit_record(RECORD, pool, random.Random(seed), max_edits=3)
        assert edited is not None and len(edited.edits) == 3
        assert edited.original_answer() == RECORD.answer
        quoted = RECORD.gold[0]
        shift = 0
        for edit in edited.edits:
            assert edited.answer[edit.start : edit.end] == edit.replacement
            assert edit.kind in EDIT_KINDS and edit.replacement != edit.original
            assert edit.replacement.lower() not in SOURCE.lower()
            assert edit.replacement.lower() not in RECORD.answer.lower()
            original_start = edit.start - shift
            assert quoted.start <= original_start and original_start + len(edit.original) <= quoted.end
            assert RECORD.answer[original_start : original_start + len(edit.original)] == edit.original
            shift += len(edit.replacement) - len(edit.original)
            if edit.original == "March":
                assert edit.replacement in MONTHS
            elif edit.original == "1916":
                assert 1856 <= int(edit.replacement) <= 1976
            elif edit.original == "101":
                assert len(edit.replacement) == 3 and edit.replacement[0] not in "01"
            else:
                assert edit.replacement == ("Texas Senate" if " " in edit.original else "Norman")


def test_edits_are_seeded_per_record():
    other = record("It was built in 1850 by Tulsa.", ["in 1850 by Tulsa"], ["built in 1850 by Tulsa"], id="o")
    first = edit_answers([RECORD, other], seed=3)
    assert first == edit_answers([RECORD, other], seed=3)
    assert any(a != b for a, b in zip(first, edit_answers([RECORD, other], seed=4), strict=True))
    assert all(len(e.edits) <= 2 for e in first)


def test_records_without_a_swappable_value_are_dropped():
    plain = record("the cat sat on the mat.", ["cat sat"], ["the cat sat"])
    unquoted = record("Paris is big. It has 2000 bridges.", ["is big"], ["Paris is big"], id="u")
    assert edit_answers([plain, unquoted]) == []
    lone = record("Paris is near Lyon.", ["near Lyon"], ["Paris, near Lyon"])
    assert edit_record(lone, entity_pool([lone]), random.Random(0)) is None  # the only entity is its own


words = st.sampled_from(["the", "city", "of", "Paris", "Lyon", "New York", "in", "May", "1987", "42", "3.5"])


@settings(max_examples=60, deadline=None)
@given(st.lists(words, min_size=3, max_size=14), st.integers(0, 13), st.integers(1, 6), st.integers(0, 99))
def test_edits_stay_inside_gold_spans_on_random_answers(tokens, first, width, seed):
    answer = " ".join(tokens) + "."
    starts = [0]
    for token in tokens[:-1]:
        starts.append(starts[-1] + len(token) + 1)
    first = min(first, len(tokens) - 1)
    last = min(first + width, len(tokens)) - 1
    span = (starts[first], starts[last] + len(tokens[last]))
    rec = BenchmarkRecord("h", "Q?", ["the city of Rome"], answer, [GoldSpan(*span, answer[slice(*span)], 0)])
    edited = edit_record(rec, {1: ["Berlin", "Oslo"], 2: ["Los Angeles"]}, random.Random(seed), max_edits=3)
    if edited is None:
        return
    assert edited.original_answer() == answer
    shift = 0
    for edit in edited.edits:
        start = edit.start - shift
        assert span[0] <= start and start + len(edit.original) <= span[1]
        shift += len(edit.replacement) - len(edit.original)


@pytest.mark.parametrize("dataset", ["quotesum", "verigran"])
def test_real_answers_are_edited_only_inside_their_gold_spans(dataset):
    try:
        data_dir()
    except FileNotFoundError:
        pytest.skip("benchmark data not available")
    records = load_attribution(dataset)
    edited = edit_answers(records)
    assert len(edited) >= 50
    for answer in edited:
        assert answer.original_answer() == answer.record.answer
        shift = 0
        for edit in answer.edits:
            start = edit.start - shift
            inside = [
                g for g in answer.record.gold if g.start <= start and start + len(edit.original) <= g.end
            ]
            assert inside, (answer.record.id, edit)
            assert all(edit.replacement.lower() not in chunk.lower() for chunk in answer.record.chunks)
            shift += len(edit.replacement) - len(edit.original)
