"""The answer with its citation marks (rcattr.viz.cited_answer) in each style, on a hand-made result."""

from __future__ import annotations

import pytest

from rcattr.viz.cited_answer import cited_answer
from tests.helpers.results import hand_made_result


def test_marks_go_before_each_sentences_closing_punctuation() -> None:
    result = hand_made_result()
    citations = result.citations()
    assert cited_answer(result, citations, references=False) == (
        "It is 330 metres tall [1][weak]. It opened in 1889 [1]."
    )
    markdown = cited_answer(result, citations, "markdown")
    assert markdown.startswith("It is 330 metres tall[^1] *(weak)*. It opened in 1889[^1].\n\n[^1]: ")
    page = cited_answer(result, citations, "html", references=False)
    assert page.startswith('<p class="rc-answer">') and page.endswith("</p>")


def test_the_references_list_each_cited_document_once() -> None:
    result = hand_made_result()
    text = cited_answer(result, result.citations())
    assert text.split("\n\nSources:\n")[1].count("[1] ") == 1
    assert cited_answer(result, []) == result.answer  # nothing cited: the answer alone


def test_an_unknown_style_is_refused() -> None:
    result = hand_made_result()
    with pytest.raises(ValueError, match="unknown citation style 'latex'"):
        cited_answer(result, result.citations(), "latex")
