"""Segmentation: exact character offsets, Punkt sentences offline, token ranges of spans."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.text.segmentation import (
    TextSpan,
    char_spans,
    sentence_spans,
    token_ranges,
    token_spans,
    tokens_within,
    whole_span,
)


def _check_exact(text: str, spans: list[TextSpan]) -> None:
    for span in spans:
        assert text[span.start : span.end] == span.text
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))


def test_sentences_use_punkt_abbreviations_offline() -> None:
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday. Then he left."
    spans = sentence_spans(text)
    assert [s.text for s in spans] == [
        "Dr. Smith went to Washington.",
        "He arrived at 5 p.m. on Monday.",
        "Then he left.",
    ]
    _check_exact(text, spans)


def test_sentences_split_lines_and_keep_offsets_with_unicode_and_whitespace() -> None:
    text = "  Title line\n\nCafé au lait — très bon.   Ça coûte 3 €.\n\t東京は大きい。 Last one.  \n"
    spans = sentence_spans(text, source=2)
    _check_exact(text, spans)
    assert spans[0].text == "Title line"
    assert "Café au lait — très bon." in [s.text for s in spans]
    assert all(s.source == 2 and s.text == s.text.strip() for s in spans)


def test_no_sentences_in_blank_text() -> None:
    assert sentence_spans(" \n\t ") == []


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .?!\n\tÉ東,")), max_size=80))
def test_sentences_cover_every_visible_character(text: str) -> None:
    spans = sentence_spans(text)
    _check_exact(text, spans)
    assert "".join("".join(s.text.split()) for s in spans) == "".join(text.split())


def test_char_spans_checked() -> None:
    assert char_spans("hello world", [(0, 5), (6, 11)])[1] == TextSpan(6, 11, "world")
    for bad in [(0, 12), (-1, 2), (3, 3), (5, 2)]:
        with pytest.raises(ValueError, match=r"0 <= start < end <= 11"):
            char_spans("hello world", [bad])


def test_one_pair_instead_of_a_list_of_spans_is_named() -> None:
    with pytest.raises(ValueError, match=r"^\(0, 10\) is one span; give a list of spans: \[\(0, 10\)\]$"):
        char_spans("hello world", (0, 10))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"span 3 is not a \(start, end\) pair"):
        char_spans("hello world", [(0, 1), 3])  # type: ignore[list-item]


def test_whole_span() -> None:
    assert whole_span("abc", 4) == TextSpan(0, 3, "abc", 4)


# Offsets of a tokenized string "<s>The cat sat." with a special token, then words with leading spaces.
OFFSETS = np.array([[0, 0], [0, 3], [3, 7], [7, 11], [11, 12]])
TEXT = "The cat sat."


def test_token_ranges_include_straddling_tokens_in_both_spans() -> None:
    spans = [TextSpan(0, 5, TEXT[0:5]), TextSpan(5, 12, TEXT[5:12])]  # "The c" | "at sat."
    assert token_ranges(spans, OFFSETS, [0]) == [range(1, 3), range(2, 5)]


def test_token_ranges_use_source_shifts_and_skip_special_tokens() -> None:
    offsets = OFFSETS + np.array([[10, 10]])  # the text starts at character 10 of the prompt
    offsets[0] = [0, 0]
    spans = [TextSpan(4, 7, "cat", source=1)]
    assert token_ranges(spans, offsets, [0, 10]) == [range(2, 3)]
    assert token_ranges([TextSpan(0, 3, "The")], OFFSETS, [0]) == [range(1, 2)]


def test_token_ranges_tolerate_offsets_that_go_back() -> None:
    offsets = np.array([[0, 1], [1, 2], [1, 2], [2, 3]])  # two byte pieces of one character
    assert token_ranges([TextSpan(1, 2, "é")], offsets, [0]) == [range(1, 3)]


def test_token_ranges_reject_spans_without_tokens() -> None:
    with pytest.raises(ValueError, match="covers no token"):
        token_ranges([TextSpan(20, 25, "xxxxx")], OFFSETS, [0])


def test_token_spans_are_clipped_to_the_text() -> None:
    prompt = "Q: The cat sat. A:"
    offsets = np.array([[0, 2], [2, 6], [6, 10], [10, 14], [14, 18]])
    spans = token_spans(offsets, 3, 15, prompt[3:15], source=1)
    assert [s.text for s in spans] == ["The", " cat", " sat", "."]
    _check_exact(prompt[3:15], spans)


def test_tokens_within_keeps_the_non_blank_tokens_that_overlap_the_characters() -> None:
    tokens = char_spans("It is 330 m.", [(0, 2), (2, 3), (3, 5), (5, 9), (9, 12)])
    assert tokens_within(tokens, 3, 9) == [2, 3]  # the blank token between is left out
    assert tokens_within(tokens, 6, 7) == [3] and tokens_within(tokens, 12, 12) == []
