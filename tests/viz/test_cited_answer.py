"""The answer with its citation marks (rcattr.viz.cited_answer) in each style, on a hand-made result."""

from __future__ import annotations

import pytest

from rcattr.grounding.citation_rule import CitationRule
from rcattr.grounding.citations import Citation, CitedSource
from rcattr.viz import to_html
from rcattr.viz.cited_answer import cited_answer
from tests.helpers.cited import (
    CITED_ANSWER,
    SENTENCE_ROWS,
    SENTENCES,
    made_result,
    sentence_result,
    steam_engine_chunks,
    supported_result,
    titled_result,
)
from tests.helpers.results import hand_made_result


def test_marks_go_before_each_sentences_closing_punctuation() -> None:
    result = hand_made_result()
    citations = result.citations()
    assert cited_answer(result, citations, CitationRule(references=False)) == (
        "It is 330 metres tall [1][weak]. It opened in 1889 [1]."
    )
    markdown = cited_answer(result, citations, CitationRule(style="markdown"))
    assert markdown.startswith("It is 330 metres tall[^1] *(weak)*. It opened in 1889[^1].\n\n[^1]: ")
    page = cited_answer(result, citations, CitationRule(style="html", references=False))
    assert page.startswith('<p class="rc-answer">') and page.endswith("</p>")


def test_the_references_list_each_cited_document_once() -> None:
    result = hand_made_result()
    text = cited_answer(result, result.citations())
    assert text.split("\n\nSources:\n")[1].count("[1] ") == 1
    assert cited_answer(result, []) == result.answer  # nothing cited: the answer alone


def test_the_source_list_tells_apart_chunks_of_one_article() -> None:
    result = made_result(SENTENCES, SENTENCE_ROWS, [0.7, 0.6, 0.1], documents=steam_engine_chunks())
    rule = {"min_share": 0.5, "max_sources": 2, "min_reliance": 0.3, "min_support": 0}
    assert result.cited_answer(**rule).endswith(
        "Sources:\n[1] Steam engine · Steam_engine-11\n[2] Steam engine · Steam_engine-12"
    )
    assert "[^2]: Steam engine · Steam\\_engine-12" in result.cited_answer("markdown", **rule)


def test_an_unknown_style_is_refused() -> None:
    result = hand_made_result()
    with pytest.raises(ValueError, match="unknown citation style 'latex'"):
        result.cited_answer("latex")  # type: ignore[arg-type]


def test_cited_answer_in_each_style() -> None:
    result = sentence_result(reliance=[0.7, 0.6, 0.1])
    rule = {"min_share": 0.5, "max_sources": 2, "min_reliance": 0.3, "min_support": 0}
    assert result.cited_answer(**rule) == (
        "It is 330 metres tall [1]. It opened in 1889 [2][1]! Bread <3 [unsupported: 3]\n\n"
        "Sources:\n[1] Eiffel Tower\n[2] history.txt"
    )
    assert result.cited_answer("markdown", **rule) == (
        "It is 330 metres tall[^1]. It opened in 1889[^2][^1]! Bread &lt;3 *(unsupported: 3)*\n\n"
        "[^1]: [Eiffel Tower](https://x.org/e)\n[^2]: history.txt"
    )
    page = result.cited_answer("html", **rule)
    assert (
        'Bread &lt;<mark class="rc-unheld"' in page
        and '<li id="rc-source-1" value="1"><a href="https://x.org/e">' in page
    )
    assert result.cited_answer(references=False, **rule).endswith("Bread <3 [unsupported: 3]")
    nothing_cited = sentence_result(reliance=[0.0, 0.0, 0.0]).cited_answer(min_reliance=0.5)
    assert nothing_cited == f"{CITED_ANSWER} [unsupported: 3]"  # no source; the unheld number still flagged
    with pytest.raises(ValueError, match="unknown citation style 'latex'"):
        result.cited_answer("latex")


def test_weak_and_unsupported_sentences_are_marked_in_each_style() -> None:
    support = [0.9, 0.9, 0.9, 0.9, 0.9, 0.4, 0.4, 0.4, 0.4, 0.9, 0.9]
    result = supported_result(support)
    rule = {"min_share": 0.5, "references": False}
    assert (
        result.cited_answer(**rule)
        == "It is 330 metres tall [1]. It opened in 1889 [2][1][weak]! Bread <3 [unsupported: 3]"
    )
    assert result.cited_answer("markdown", **rule) == (
        "It is 330 metres tall[^1]. It opened in 1889[^2][^1] *(weak)*! Bread &lt;3 *(unsupported: 3)*"
    )
    page = result.cited_answer("html", **rule)
    assert '<sup class="rc-status rc-weak" title="token support 0.40 (weak): the documents support' in page
    assert (
        'Bread &lt;<mark class="rc-unheld"' in page
        and ">3</mark>" in page
        and ">unsupported: 3</sup>" in page
    )
    # likely tokens do not vouch for a number no document holds
    assert supported_result([0.9] * 11).cited_answer(**rule) == (
        "It is 330 metres tall [1]. It opened in 1889 [2][1]! Bread <3 [unsupported: 3]"
    )
    assert "rc-unsupported" in to_html(result) and "rc-weak" in to_html(result)


@pytest.mark.parametrize(
    ("metadata", "answer", "expected"),
    [
        (  # a title that closes the link text and opens its own link
            {"title": "Fuji](https://evil.example)", "url": "https://x.org/e"},
            "It is tall.",
            "It is tall[^1].\n\n[^1]: [Fuji\\](https://evil.example)](https://x.org/e)",
        ),
        (  # raw HTML in a title, with and without a link
            {"title": "<img src=x onerror=alert(1)>"},
            "It is tall.",
            "It is tall[^1].\n\n[^1]: &lt;img src=x onerror=alert(1)&gt;",
        ),
        (  # raw HTML, a footnote reference and emphasis in the answer
            {"title": "T"},
            "It is <b>tall</b> [^2] *really* & `so`.",
            "It is &lt;b&gt;tall&lt;/b&gt; \\[\\^2\\] \\*really\\* &amp; \\`so\\`[^1].\n\n[^1]: T",
        ),
        (  # urls with spaces, parentheses and quotes stay one destination
            {"title": "T", "url": 'https://x.org/a b)c"d'},
            "It is tall.",
            "It is tall[^1].\n\n[^1]: [T](https://x.org/a%20b%29c%22d)",
        ),
        (  # only http(s) urls become links
            {"title": "T", "url": "javascript:alert(1)"},
            "It is tall.",
            "It is tall[^1].\n\n[^1]: T",
        ),
        (  # block markers at a line's start: a heading, a list item, a numbered item
            {"title": "# T"},
            "# It is tall.\n- It is.\n1) It is.",
            "\\# It is tall[^1].\n\\- It is[^1].\n1\\) It is[^1].\n\n[^1]: \\# T",
        ),
    ],
)
def test_markdown_citations_are_escaped(metadata: dict[str, object], answer: str, expected: str) -> None:
    assert titled_result(metadata, answer).cited_answer("markdown") == expected


def test_markdown_marks_are_not_read_as_links_or_definitions() -> None:
    cites = CitedSource(1, 1.0, None, {})
    for answer, text, expected in [
        ("Yes(https://evil.example)", "Yes", "Yes[^1]\\(https://evil.example)"),  # [^1](...) would link
        (": see x", ":", "[^1]\\: see x"),  # [^1]: at a line's start would define a footnote
    ]:
        citation = Citation(0, len(text), text, [cites], None)
        assert (
            cited_answer(
                titled_result({}, answer), [citation], CitationRule(style="markdown", references=False)
            )
            == expected
        )
