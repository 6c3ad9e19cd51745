"""Long-context records: each record's sources among seeded distractors, to a length, gold spans following."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.eval.attribution.long_context import (
    LongContext,
    distractors_for,
    long_records,
    placed,
    stretched,
)
from rcattr.eval.common.datasets import BenchmarkRecord, GoldSpan

OWN = ["alpha beta gamma", "delta epsilon", "zeta eta theta iota"]
RECORD = BenchmarkRecord(
    id="r1",
    question="What is alpha?",
    chunks=OWN,
    answer="alpha is zeta",
    gold=[GoldSpan(0, 5, "alpha", 0), GoldSpan(9, 13, "zeta", 2)],
    titles=["a", "b", "c"],
)
SAME_FILE = [
    (RECORD.question, OWN[0]),
    ("Q2", "kappa lambda mu"),
    ("Q2", "nu xi"),
    ("Q3", "omicron pi rho sigma"),
]
SQUAD = [(f"p{i}", f"paragraph {i} " + "word " * (i % 7)) for i in range(40)]
POOLS = (SAME_FILE, SQUAD)


def words(text: str) -> int:
    return len(text.split())


def length(record: BenchmarkRecord) -> int:
    """A stand-in tokenizer: one token per word of the documents (with their ``Document [i]:``), answer and
    question."""
    return sum(words(chunk) + 2 for chunk in record.chunks) + words(record.answer) + words(record.question)


def passage_tokens(passage: str) -> int:
    return words(passage) + 2


def test_gold_spans_follow_the_records_sources_at_each_position() -> None:
    distractors = ["d1", "d2", "d3", "d4", "d5"]
    for position, before in (("start", 0), ("middle", 2), ("end", 5)):
        long = placed(RECORD, distractors, position)
        assert long.chunks[before : before + 3] == OWN and len(long.chunks) == 8
        assert [long.chunks[span.source] for span in long.gold] == ["alpha beta gamma", "zeta eta theta iota"]
        assert long.id == RECORD.id and long.answer == RECORD.answer and long.titles is None


def test_distractors_leave_out_the_records_question_and_its_own_passages() -> None:
    drawn = list(distractors_for(RECORD, POOLS, seed=0))
    assert OWN[0] not in drawn and "kappa lambda mu" in drawn
    assert len(drawn) == len(set(drawn)) == 3 + len(SQUAD)
    # the pools are taken in turn: the file's passages are among the first of the list, not after SQuAD's
    same_file = {text for _, text in SAME_FILE}
    assert {i for i, text in enumerate(drawn) if text in same_file} <= set(range(2 * len(SAME_FILE)))


def test_the_order_is_seeded_by_the_run_and_the_record() -> None:
    first = list(distractors_for(RECORD, POOLS, seed=0))
    assert first == list(distractors_for(RECORD, POOLS, seed=0))
    assert first != list(distractors_for(RECORD, POOLS, seed=1))
    other = BenchmarkRecord("r2", RECORD.question, OWN, RECORD.answer, RECORD.gold)
    assert first != list(distractors_for(other, POOLS, seed=0))


@settings(max_examples=60, deadline=None)
@given(tokens=st.integers(min_value=length(RECORD), max_value=200), seed=st.integers(0, 5))
def test_a_stretched_record_fills_its_length_without_passing_it(tokens: int, seed: int) -> None:
    long = stretched(RECORD, LongContext(tokens, "middle", seed), POOLS, length, passage_tokens)
    assert length(long) <= tokens
    left_out = set(distractors_for(RECORD, POOLS, seed)) - set(long.chunks)
    # full: no distractor left out would still have fitted (the shortest passage is 3 tokens here)
    assert (
        tokens - length(long) < 8
        or not left_out
        or min(map(passage_tokens, left_out)) > tokens - length(long)
    )
    assert [long.chunks[span.source] for span in long.gold] == [OWN[0], OWN[2]]


def test_a_short_estimate_is_checked_on_the_whole_prompt() -> None:
    long = stretched(
        RECORD, LongContext(60), POOLS, length, lambda passage: 1
    )  # every passage underestimated
    assert length(long) <= 60 and len(long.chunks) > len(OWN)


def test_records_longer_than_the_length_on_their_own_are_left_out() -> None:
    short = BenchmarkRecord("s", "Q?", ["one"], "one", [GoldSpan(0, 3, "one", 0)])
    kept = long_records([RECORD, short], LongContext(length(short) + 5), POOLS, length, passage_tokens)
    assert [record.id for record in kept] == ["s"]
    with pytest.raises(ValueError, match="longer than"):
        stretched(RECORD, LongContext(5), POOLS, length, passage_tokens)


def test_a_long_context_is_validated() -> None:
    with pytest.raises(ValueError, match="position must be one of start, middle, end"):
        LongContext(100, "centre")
    with pytest.raises(ValueError, match="tokens must be positive"):
        LongContext(0)
