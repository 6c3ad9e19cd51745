"""Documents with metadata, the citation rule, result.citations() and cited_answer() on hand-made scores and
on a tiny model."""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rcattr import ContextInput, RCAttributor
from rcattr.attributed import AttributedAnswer, AttributedContext
from rcattr.baselines import BM25Attributor
from rcattr.citations import Citation, CitedSource, SentenceRows, cited_sources, sentence_groups
from rcattr.documents import Document, as_document
from rcattr.result import RCAttributionResult
from rcattr.segmentation import TextSpan, sentence_spans, whole_span
from rcattr.viz import to_html
from rcattr.viz.cited_answer import cited_answer
from tests.helpers import char_tokenizer, rc_signals, tiny_model

DOCUMENTS = [
    Document(
        "The tower is 330 metres tall. It is in Paris.", {"title": "Eiffel Tower", "url": "https://x.org/e"}
    ),
    Document("It opened in 1889 <b>on time</b>.", {"source": "history.txt"}, id="doc-2"),
    Document("Bread is baked daily."),
]
ANSWER = "It is 330 metres tall. It opened in 1889! Bread <3"


def _spans() -> list[TextSpan]:
    pieces = [
        (0, "The tower is 330 metres tall."),
        (0, "It is in Paris."),
        (1, DOCUMENTS[1].text),
        (2, DOCUMENTS[2].text),
    ]
    return [
        TextSpan(DOCUMENTS[d].text.index(t), DOCUMENTS[d].text.index(t) + len(t), t, d) for d, t in pieces
    ]


# each answer sentence's scores over _spans(): sentence 1 cites document 1 (0.8; document 2 has 0.15),
# sentence 2 documents 2 (0.55) and 1 (0.45), sentence 3 nothing
SENTENCE_ROWS = [[0.6, 0.2, 0.15, 0.05], [0.25, 0.2, 0.55, 0.0], [0.0, 0.0, 0.0, 0.0]]
SENTENCES = [TextSpan(0, 22, ANSWER[:22]), TextSpan(23, 41, ANSWER[23:41]), TextSpan(42, 50, ANSWER[42:])]


def _made(
    outputs: list[TextSpan],
    rows: list[list[float]],
    reliance: list[float] | None = None,
    documents: list[Document] = DOCUMENTS,
    answer: str = ANSWER,
    spans: list[TextSpan] | None = None,
) -> RCAttributionResult:
    token_attr = torch.tensor(rows)
    return RCAttributionResult(
        token_attr.mean(0),
        token_attr,
        context=AttributedContext(documents, _spans() if spans is None else spans),
        output=AttributedAnswer(answer, outputs, [TextSpan(0, 2, answer[:2])]),
        span_scorer="attention",
        rc=None if reliance is None else rc_signals(1, len(outputs), reliance=reliance),
    )


def _result(reliance: list[float] | None = None) -> RCAttributionResult:
    return _made(SENTENCES, SENTENCE_ROWS, reliance)


def test_documents_are_read_as_rag_frameworks_hold_them() -> None:
    langchain = SimpleNamespace(page_content="A.", metadata={"source": "a.pdf", "page": 3}, id="lc-1")
    llama_index = SimpleNamespace(text="B.", metadata={"file_name": "b.md"}, id_="node-7")
    mapping = {"page_content": "C.", "metadata": {"title": "C"}}
    documents = ContextInput(["plain", langchain, llama_index, mapping, {"text": "D."}], "Q?").documents
    assert documents == [
        Document("plain"),
        Document("A.", {"source": "a.pdf", "page": 3}, "lc-1"),
        Document("B.", {"file_name": "b.md"}, "node-7"),
        Document("C.", {"title": "C"}),
        Document("D."),
    ]
    assert ContextInput(documents).chunks == ["plain", "A.", "B.", "C.", "D."]
    assert [d.label() for d in documents] == ["plain", "a.pdf", "b.md", "C", "D."]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (3, r"context document 1 \(int\) has no page_content, text or content"),
        ({"text": 5}, r"context document 1 \(dict\) has a int as its text"),
        (SimpleNamespace(page_content="x", metadata=["a"]), "context document 1: metadata must be a mapping"),
    ],
)
def test_documents_without_text_are_refused(item: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        ContextInput(["fine", item])
    with pytest.raises(TypeError, match="wrap a single document in a list"):
        ContextInput(SimpleNamespace(page_content="x"))  # type: ignore[arg-type]


def test_document_text_is_checked_like_a_string() -> None:
    with pytest.raises(ValueError, match="NUL character"):
        ContextInput([{"page_content": "a\x00b"}])
    assert as_document(DOCUMENTS[1], 0) is DOCUMENTS[1]


def test_document_scores_sum_each_documents_spans() -> None:
    result = _result()
    for output in (None, 0, 1, 2):
        scores = result.scores(output)
        expected = [
            sum(float(scores[i]) for i, s in enumerate(result.context_spans) if s.source == d)
            for d in range(3)
        ]
        assert result.document_scores(output).tolist() == pytest.approx(expected)


@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=12),
    st.floats(0.01, 1),
    st.integers(1, 5),
    st.one_of(st.none(), st.floats(0, 1)),
    st.floats(0, 1),
)
def test_the_rule_cites_what_its_definition_says(
    shares: list[float], min_share: float, most: int, reliance: float | None, min_reliance: float
) -> None:
    cited, why = cited_sources(
        shares, reliance, min_share=min_share, max_sources=most, min_reliance=min_reliance
    )
    if reliance is not None and reliance < min_reliance:
        assert (cited, why) == ([], "low reliance")
    elif max(shares) == 0:
        assert (cited, why) == ([], "no context scores")
    else:
        eligible = {d for d, s in enumerate(shares) if s >= min_share * max(shares)}
        assert why is None and set(cited) <= eligible and len(cited) == min(most, len(eligible))
        assert [shares[d] for d in cited] == sorted((shares[d] for d in cited), reverse=True)
        assert all(shares[d] <= min(shares[c] for c in cited) for d in eligible - set(cited))


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"min_share": 0}, "min_share must be in"),
        ({"max_sources": 0}, "max_sources must be a whole number"),
        ({"min_reliance": 1.5}, "min_reliance must be in"),
    ],
)
def test_rule_arguments_are_checked(rule: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _result().citations(**rule)  # type: ignore[arg-type]


def test_citations_carry_offsets_scores_and_metadata() -> None:
    result = _result(reliance=[0.7, 0.6, 0.1])
    # min_support=0: the reliance rule alone ("Bread <3" holds a number no document holds)
    first, second, third = result.citations(
        min_share=0.5, max_sources=2, min_reliance=0.3, sentences=1, min_support=0
    )
    assert (first.start, first.end, first.text) == (0, 22, "It is 330 metres tall.")
    assert [s.document for s in first.sources] == [0] and first.sources[0].score == pytest.approx(0.8)
    assert first.sources[0].metadata == {"title": "Eiffel Tower", "url": "https://x.org/e"}
    span = first.sources[0].spans[0]
    assert DOCUMENTS[0].text[span.start : span.end] == span.text == "The tower is 330 metres tall."
    assert [(s.number, s.id) for s in second.sources] == [(2, "doc-2"), (1, None)]
    assert (
        third.sources == []
        and third.uncited == "low reliance"
        and third.context_reliance == pytest.approx(0.1)
    )
    assert _result().citations(min_share=1.0)[2].uncited == "no context scores"  # a baseline: no reliance


def test_cited_answer_in_each_style() -> None:
    result = _result(reliance=[0.7, 0.6, 0.1])
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
    nothing_cited = _result(reliance=[0.0, 0.0, 0.0]).cited_answer(min_reliance=0.5)
    assert nothing_cited == f"{ANSWER} [unsupported: 3]"  # no source; the unheld number still flagged
    with pytest.raises(ValueError, match="unknown citation style 'latex'"):
        result.cited_answer("latex")


def _supported(support: list[float], answer: str = ANSWER) -> RCAttributionResult:
    """The hand-made result with one answer token per word, of the given token support."""
    result = _result(reliance=[0.7, 0.6, 0.6])
    words = [TextSpan(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", answer)]
    assert len(words) == len(support)
    result.answer_tokens = words
    result.rc = replace(
        rc_signals(len(words), 3, reliance=[0.7, 0.6, 0.6]), token_support=torch.tensor(support)
    )
    return result


def test_each_sentence_is_vouched_for_by_its_token_support_and_its_claims() -> None:
    # sentence 2 weak by its tokens; sentence 3's number "3" is in no document sentence
    support = [0.9, 0.9, 0.9, 0.9, 0.9, 0.4, 0.4, 0.4, 0.4, 0.9, 0.9]
    first, second, third = _supported(support).citations(min_share=0.5)
    assert (first.support, first.status) == (pytest.approx(0.9), "supported") and first.sources
    assert (second.support, second.status) == (pytest.approx(0.4), "weak") and second.sources
    assert [(c.text, c.held) for c in first.claims] == [("330", True)]
    assert [(c.text, c.held, c.support) for c in third.unheld_claims] == [("3", False, pytest.approx(0.9))]
    assert (third.support, third.status, third.sources, third.uncited) == (
        0.0,
        "unsupported",
        [],
        "unsupported",
    )
    everything = _supported(support).citations(min_share=0.5, min_support=0)
    assert everything[2].status == "unsupported" and everything[2].uncited == "no context scores"
    assert _result().citations()[0].status is None and _result().citations()[0].support is None  # no support


def test_weak_and_unsupported_sentences_are_marked_in_each_style() -> None:
    support = [0.9, 0.9, 0.9, 0.9, 0.9, 0.4, 0.4, 0.4, 0.4, 0.9, 0.9]
    result = _supported(support)
    rule = {"min_share": 0.5, "references": False}
    assert (
        result.cited_answer(**rule)
        == "It is 330 metres tall [1]. It opened in 1889 [2][1][weak]! Bread <3 [unsupported: 3]"
    )
    assert result.cited_answer("markdown", **rule) == (
        "It is 330 metres tall[^1]. It opened in 1889[^2][^1] *(weak)*! Bread &lt;3 *(unsupported: 3)*"
    )
    page = result.cited_answer("html", **rule)
    assert '<sup class="rc-status rc-weak" title="support 0.40: ' in page
    assert (
        'Bread &lt;<mark class="rc-unheld"' in page
        and ">3</mark>" in page
        and ">unsupported: 3</sup>" in page
    )
    # likely tokens do not vouch for a number no document holds
    assert _supported([0.9] * 11).cited_answer(**rule) == (
        "It is 330 metres tall [1]. It opened in 1889 [2][1]! Bread <3 [unsupported: 3]"
    )
    assert "rc-unsupported" in to_html(result) and "rc-weak" in to_html(result)


def test_metadata_reaches_to_dict_and_html() -> None:
    result = _result(reliance=[0.7, 0.6, 0.1])
    data = json.loads(json.dumps(result.to_dict()))
    assert data["documents"][1] == {"document": 2, "id": "doc-2", "metadata": {"source": "history.txt"}}
    page = to_html(result)
    assert "Document [1]: Eiffel Tower" in page and "<b>id</b>: doc-2" in page and "history.txt" in page
    assert "&lt;b&gt;on time&lt;/b&gt;" in page and "<b>on time</b>" not in page
    assert 'id="cited"' in page and "rc-source-1" in page


def test_the_page_shows_metadata_values_as_a_reader_reads_them() -> None:
    import datetime

    metadata = {"title": b"Caf\xc3\xa9", "published": datetime.date(2024, 5, 1), "pages": (3, 4)}
    documents = [Document(DOCUMENTS[0].text, metadata), *DOCUMENTS[1:]]
    page = to_html(_made(SENTENCES, SENTENCE_ROWS, documents=documents))
    assert "<b>title</b>: Café" in page and "b&#x27;" not in page
    assert "<b>published</b>: 2024-05-01" in page and "<b>pages</b>: [3, 4]" in page


def test_citations_from_a_model_run() -> None:
    documents = [
        {"page_content": "Paris is the capital of France. It is large.", "metadata": {"title": "France"}},
        SimpleNamespace(page_content="Berlin is in Germany.", metadata={"source": "de.txt"}, id="d2"),
    ]
    inp = ContextInput(documents, "What is the capital?")
    model, tokenizer = tiny_model("llama"), char_tokenizer()
    result = RCAttributor(model, tokenizer).attribute(
        inp, "Paris is. Berlin too.", granularity="sentence", output_granularity="sentence"
    )
    assert [d.metadata for d in result.documents] == [{"title": "France"}, {"source": "de.txt"}]
    citations = result.citations(sentences=2, min_support=0)  # a random model: its support is arbitrary
    assert [c.text for c in citations] == ["Paris is.", "Berlin too."]
    for citation in citations:
        assert citation.status in ("supported", "weak", "unsupported") and 0 <= citation.support <= 1
        assert result.answer[citation.start : citation.end] == citation.text
        assert 1 <= len(citation.sources) <= 2 and citation.context_reliance is not None
        for cited in citation.sources:
            assert cited.score == pytest.approx(
                float(result.document_scores(citations.index(citation))[cited.document])
            )
            for span in cited.spans:
                assert result.chunks[cited.document][span.start : span.end] == span.text
    baseline = BM25Attributor(model, tokenizer).attribute(inp, "Paris is.", output_granularity="sentence")
    assert baseline.citations()[0].context_reliance is None and baseline.documents[1].id == "d2"


def _tokens(text: str) -> list[TextSpan]:
    """Word-piece-like tokens of ``text``: words and punctuation runs, each with the spaces before it."""
    return [TextSpan(m.start(), m.end(), m.group()) for m in re.finditer(r"\s*\w+|\s*[^\w\s]+", text)]


def test_sentence_groups_pair_units_with_the_sentences_they_lie_in() -> None:
    sentences = [TextSpan(0, 5, ""), TextSpan(6, 10, ""), TextSpan(11, 15, ""), TextSpan(16, 20, "")]
    tokens = [
        TextSpan(0, 3, ""),
        TextSpan(3, 5, ""),
        TextSpan(5, 6, ""),
        TextSpan(6, 10, ""),
        TextSpan(16, 18, ""),
    ]
    assert sentence_groups(sentences, tokens) == [
        (range(0, 1), [0, 1]),
        (range(1, 2), [3]),
        (range(3, 4), [4]),
    ]
    assert sentence_groups(sentences, [TextSpan(0, 20, "")]) == [(range(0, 4), [0])]  # the whole answer
    spanning = [TextSpan(0, 8, ""), TextSpan(7, 12, ""), TextSpan(16, 20, "")]  # units across sentences chain
    assert sentence_groups(sentences, spanning) == [(range(0, 3), [0, 1]), (range(3, 4), [2])]


def test_token_units_are_cited_per_sentence_at_its_end() -> None:
    tokens = _tokens(ANSWER)
    sentence_of = [next(i for i, s in enumerate(SENTENCES) if s.start <= t.end - 1 < s.end) for t in tokens]
    assert sentence_of.count(1) == 5  # " It", " opened", " in", " 1889", "!"
    # the tokens of sentence 2 differ, but average to its row: (2 * first + 2 * second + row) / 5
    second = iter([[0.5, 0.4, 0.1, 0.0], [0.0, 0.0, 1.0, 0.0]] * 2 + [SENTENCE_ROWS[1]])
    rows = [next(second) if sentence == 1 else SENTENCE_ROWS[sentence] for sentence in sentence_of]
    reliance = [[0.7, 0.6, 0.1][sentence] for sentence in sentence_of]
    result, by_sentence = _made(tokens, rows, reliance), _result([0.7, 0.6, 0.1])
    rule = {"min_share": 0.5, "max_sources": 2, "min_reliance": 0.3}
    for style in ("[n]", "markdown", "html"):
        assert result.cited_answer(style, **rule) == by_sentence.cited_answer(style, **rule)
    citations = result.citations(**rule, sentences=1)
    assert [(c.start, c.end, c.text, c.n_sentences) for c in citations] == [
        (s.start, s.end, s.text, 1) for s in SENTENCES
    ]
    for token_level, sentence_level in zip(
        citations, by_sentence.citations(**rule, sentences=1), strict=True
    ):
        assert token_level.context_reliance == pytest.approx(sentence_level.context_reliance)
        assert [(c.number, c.spans[0].text) for c in token_level.sources] == [
            (c.number, c.spans[0].text) for c in sentence_level.sources
        ]
        assert [c.score for c in token_level.sources] == pytest.approx(
            [c.score for c in sentence_level.sources]
        )


def test_a_whole_answer_unit_is_cited_per_sentence_from_its_sentence_rows() -> None:
    # issue 48's case: the whole answer splits 0.57 / 0.43 between two documents, so the rule on its one row
    # cites one; its sentences' own rows cite each its document
    answer = ANSWER[:41]  # "It is 330 metres tall. It opened in 1889!"
    sentences = sentence_spans(answer)
    rows = SentenceRows(sentences, torch.tensor([[0.7, 0.2, 0.1, 0.0], [0.1, 0.0, 0.9, 0.0]]), None)
    result = _made([whole_span(answer)], [[0.3, 0.27, 0.43, 0.0]], answer=answer)
    result.sentence_rows = rows
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cited = [[source.number for source in citation.sources] for citation in result.citations()]
        assert cited == [[1], [2]]
        assert result.cited_answer(references=False) == "It is 330 metres tall [1]. It opened in 1889 [2]!"


def test_a_unit_over_sentences_without_their_rows_is_cited_once_at_its_end_and_says_why() -> None:
    # the whole answer draws 0.57 on document 1 and 0.43 on document 2: the rule cites document 1 only; the
    # result has no rows of the sentences (as with given character spans), so they are cited together
    result = _made([whole_span(ANSWER)], [[0.3, 0.27, 0.43, 0.0]])
    with pytest.warns(
        UserWarning, match=r"3 sentences of the answer are cited together.*output_granularity='answer'"
    ):
        (citation,) = result.citations()
    assert (citation.start, citation.end, citation.text, citation.n_sentences) == (0, len(ANSWER), ANSWER, 3)
    assert [cited.number for cited in citation.sources] == [1]
    with pytest.warns(UserWarning, match="3 sentences of the answer are cited together") as caught:
        assert result.cited_answer() == ANSWER + " [1]\n\nSources:\n[1] Eiffel Tower"
    assert caught[0].filename == __file__  # the warning points at the caller
    one = _made([whole_span(ANSWER[:22])], [SENTENCE_ROWS[0]], answer=ANSWER[:22])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an answer of one sentence is cited per sentence: no warning
        assert one.cited_answer(references=False) == "It is 330 metres tall [1]."


def test_citations_per_sentence_from_a_model_run_whatever_the_output_units() -> None:
    inp = ContextInput(["Paris is the capital of France.", "Berlin is in Germany."], "What is the capital?")
    attributor = RCAttributor(tiny_model("llama"), char_tokenizer())
    answer = "Paris is. Berlin too."
    tokens = attributor.attribute(inp, answer, granularity="chunk", output_granularity="token")
    assert len(tokens.output_spans) == len(answer)  # one unit per character
    citations = tokens.citations(min_support=0)  # a random model: its support is arbitrary
    assert [(c.text, c.n_sentences) for c in citations] == [("Paris is.", 1), ("Berlin too.", 1)]
    marked = tokens.cited_answer(references=False, min_support=0)
    status = r"(\[weak\]|\[unsupported\])?"
    assert re.fullmatch(rf"Paris is( \[\d\])+{status}\. Berlin too( \[\d\])+{status}\.", marked), marked
    # the whole answer as the unit: its sentences are scored too (sentence_rows), and cited as sentence units are
    whole = attributor.attribute(inp, answer, granularity="chunk", output_granularity="answer")
    sentences = attributor.attribute(inp, answer, granularity="chunk", output_granularity="sentence")
    assert len(whole.output_spans) == 1 and whole.token_attr.shape[0] == 1 and whole.sentence_rows is not None
    assert whole.unit_context_reliance is not None and whole.unit_context_reliance.shape == (1,)
    torch.testing.assert_close(whole.sentence_rows.scores, sentences.token_attr)
    torch.testing.assert_close(whole.sentence_rows.context_reliance, sentences.unit_context_reliance)
    torch.testing.assert_close(whole.seq_attr, sentences.seq_attr)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing cited together
        assert whole.citations() == sentences.citations()
        assert whole.cited_answer() == sentences.cited_answer()


def _titled(metadata: dict[str, object], answer: str = "It is tall.") -> RCAttributionResult:
    documents = [Document("The tower is tall.", metadata)]
    return _made(
        sentence_spans(answer),
        [[1.0]] * len(sentence_spans(answer)),
        documents=documents,
        answer=answer,
        spans=[whole_span(documents[0].text)],
    )


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
    assert _titled(metadata, answer).cited_answer("markdown") == expected


def test_markdown_marks_are_not_read_as_links_or_definitions() -> None:
    cites = CitedSource(0, 1, 1.0, None, {})
    for answer, text, expected in [
        ("Yes(https://evil.example)", "Yes", "Yes[^1]\\(https://evil.example)"),  # [^1](...) would link
        (": see x", ":", "[^1]\\: see x"),  # [^1]: at a line's start would define a footnote
    ]:
        citation = Citation(0, len(text), text, [cites], None)
        assert cited_answer(_titled({}, answer), [citation], "markdown", references=False) == expected
