"""The needle task's generator and scoring on hand-made haystacks (words stand for tokens)."""

from __future__ import annotations

import pytest

from rcattr.eval.kv.metrics import answer_match
from rcattr.eval.kv.needle import NEEDLE, QUESTION, load_needle, place_needle

SENTENCES = [f"Filler sentence number {i} here." for i in range(40)]  # 5 words each


def words(text: str) -> int:
    return len(text.split())


@pytest.mark.parametrize(
    ("answer", "found"),
    [
        ("The special magic number is 4817263.", True),
        ("4817263", True),
        ("It is 48172639.", False),  # inside a longer number
        ("It is 14817263", False),
        ("The number is 4,817,263.", False),
        ("Code x4817263y", False),
        ("The value: 4817263_", True),
        ("I do not know.", False),
    ],
)
def test_a_value_matches_only_as_a_whole_number(answer: str, found: bool) -> None:
    assert answer_match(answer, ["4817263"]) == float(found)


def test_text_answers_match_whole_words_in_any_case() -> None:
    assert answer_match("It is in paris, France.", ["Lyon", "Paris"]) == 1.0
    assert answer_match("Parisian food", ["Paris"]) == 0.0
    assert answer_match("the Champ de Mars.", ["champ de mars"]) == 1.0
    with pytest.raises(ValueError, match="no reference"):
        answer_match("x", [" "])


@pytest.mark.parametrize(("depth", "before"), [(0.0, 0), (0.25, 2), (0.5, 4), (1.0, 8)])
def test_the_needle_sits_at_its_depth_and_the_context_fits(depth: float, before: int) -> None:
    needle = "One of the special magic numbers for x is: 7."  # 10 words
    context = place_needle(SENTENCES, needle, words, 52, depth)  # 42 words of haystack: 8 sentences
    assert words(context) == 50 <= 52
    assert context.split(needle)[0].count("Filler") == before
    assert context.count("Filler") == 8 and context.count(needle) == 1


def test_placement_refuses_what_cannot_fit() -> None:
    with pytest.raises(ValueError, match="depth"):
        place_needle(SENTENCES, "needle", words, 50, 1.5)
    with pytest.raises(ValueError, match="cannot hold the needle"):
        place_needle(SENTENCES, "a b c", words, 3, 0.5)
    with pytest.raises(ValueError, match="no haystack sentence fits"):
        place_needle(SENTENCES, "a b c", words, 7, 0.5)


def test_prompts_cover_every_cell_and_are_drawn_from_the_seed() -> None:
    def needles(limit: int | None = 12, seed: int = 0) -> list:
        return load_needle(words, limit, lengths=(30, 60), depths=(0.0, 1.0), seed=seed, sentences=SENTENCES)

    records = needles()
    assert len(records) == 12 and len({record.id for record in records}) == 12
    assert len(needles(None)) == 16 and needles(5) == records[:5]  # 4 per cell by default
    assert [record.id for record in records[:4]] == [
        "needle-30-0-0",
        "needle-30-1-0",
        "needle-60-0-0",
        "needle-60-1-0",
    ]
    for record in records:
        (value,) = record.answers
        key = record.question.removeprefix(QUESTION.split("{")[0]).split(" ")[0]
        assert record.question == QUESTION.format(key=key)
        assert NEEDLE.format(key=key, value=value) in record.context and len(value) == 7
        assert words(record.context) <= int(record.id.split("-")[1])
    assert records == needles()
    assert [r.answers for r in needles(seed=1)] != [r.answers for r in records]


def test_the_haystack_is_real_prose_from_the_benchmark_data() -> None:
    records = load_needle(words, 2, lengths=(200,), depths=(0.5,))
    assert all(150 <= words(record.context) <= 200 for record in records)
    assert records[0].context != records[1].context  # each prompt its own prose
