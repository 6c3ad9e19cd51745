"""Documents with metadata, the citation rule, result.citations() and cited_answer() on hand-made scores and
on a tiny model."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rcattr import ContextInput, RCAttributor
from rcattr.baselines import BM25Attributor
from rcattr.grounding.citation_rule import CitationRule
from rcattr.grounding.citations import cited_sources, document_shares, sentence_groups
from rcattr.record.attributed import SentenceRows
from rcattr.text.documents import Document
from rcattr.text.segmentation import TextSpan, sentence_spans, whole_span
from rcattr.viz import to_html
from tests.helpers import char_tokenizer
from tests.helpers.cited import (
    CITED_ANSWER,
    CITED_DOCUMENTS,
    SENTENCE_ROWS,
    SENTENCES,
    made_result,
    sentence_result,
    supported_result,
)


def test_document_scores_are_each_documents_best_span_normalised() -> None:
    result = sentence_result()
    for output in (None, 0, 1, 2):
        scores = result.scores(output)
        best = [
            max(float(scores[i]) for i, s in enumerate(result.context_spans) if s.source == d)
            for d in range(3)
        ]
        expected = [b / sum(best) for b in best] if sum(best) > 0 else best  # the third sentence scores 0
        assert result.document_scores(output).tolist() == pytest.approx(expected)


def test_a_long_document_of_middling_spans_does_not_outrank_the_best_span() -> None:
    # document 1 has four sentences of 0.15 (0.6 summed); document 0's one sentence holds the answer (0.3)
    scores = torch.tensor([0.3, 0.15, 0.15, 0.15, 0.15, 0.1])
    shares = document_shares(scores, torch.tensor([0, 1, 1, 1, 1, 2]), 4)
    assert shares.tolist() == pytest.approx([0.3 / 0.55, 0.15 / 0.55, 0.1 / 0.55, 0.0])
    assert cited_sources(shares.tolist(), None) == ([0], None)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=8))
def test_one_span_per_document_keeps_its_share(scores: list[float]) -> None:
    # granularity="chunk": the shares are the spans' own (the citation benchmark's figures do not move)
    tensor = torch.tensor(scores, dtype=torch.float64)
    expected = tensor / tensor.sum() if tensor.sum() > 0 else tensor
    shares = document_shares(tensor, torch.arange(len(scores)), len(scores))
    assert shares.tolist() == pytest.approx(expected.tolist())


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
    cited, why = cited_sources(shares, reliance, CitationRule(min_share, most, min_reliance))
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
        sentence_result().citations(**rule)  # type: ignore[arg-type]


def test_citations_carry_offsets_scores_and_metadata() -> None:
    result = sentence_result(reliance=[0.7, 0.6, 0.1])
    # min_support=0: the reliance rule alone ("Bread <3" holds a number no document holds)
    first, second, third = result.citations(
        min_share=0.5, max_sources=2, min_reliance=0.3, sentences=1, min_support=0
    )
    assert (first.start, first.end, first.text) == (0, 22, "It is 330 metres tall.")
    assert [s.number for s in first.sources] == [1] and first.sources[0].score == pytest.approx(0.8)
    assert first.sources[0].metadata == {"title": "Eiffel Tower", "url": "https://x.org/e"}
    span = first.sources[0].spans[0]
    assert CITED_DOCUMENTS[0].text[span.start : span.end] == span.text == "The tower is 330 metres tall."
    assert [(s.number, s.id) for s in second.sources] == [(2, "doc-2"), (1, None)]
    assert (
        third.sources == []
        and third.uncited == "low reliance"
        and third.context_reliance == pytest.approx(0.1)
    )
    assert (
        sentence_result().citations(min_share=1.0)[2].uncited == "no context scores"
    )  # a baseline: no reliance


def test_each_sentence_is_vouched_for_by_its_token_support_and_its_claims() -> None:
    # sentence 2 weak by its tokens; sentence 3's number "3" is in no document sentence
    support = [0.9, 0.9, 0.9, 0.9, 0.9, 0.4, 0.4, 0.4, 0.4, 0.9, 0.9]
    first, second, third = supported_result(support).citations(min_share=0.5)
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
    everything = supported_result(support).citations(min_share=0.5, min_support=0)
    assert everything[2].status == "unsupported" and everything[2].uncited == "no context scores"
    assert (
        sentence_result().citations()[0].status is None and sentence_result().citations()[0].support is None
    )  # no support


def test_a_half_right_sentence_keeps_its_held_parts_citation_and_marks_the_claim_where_it_stands() -> None:
    """Issue 59: one invented number no longer strips the citation from a sentence whose other claims are held;
    the sentence as a whole is still not vouched for (support 0), its held part is (held_support)."""
    answer = "It is 330 metres tall, 95 wide. It opened in 1889! Bread <3"
    support = [0.9, 0.9, 0.9, 0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]
    first, second, third = supported_result(support, answer).citations(min_share=0.5)
    assert first.partly_held and [c.text for c in first.unheld_claims] == ["95"]
    assert (first.status, first.support, first.held_support) == ("partial", 0.0, pytest.approx(0.9))
    assert [s.number for s in first.sources] == [1] and first.uncited is None
    assert not second.partly_held and second.held_support == second.support
    assert (third.status, third.sources) == ("unsupported", [])  # its only claim is unheld: nothing to keep
    result = supported_result(support, answer)
    assert result.cited_answer(min_share=0.5, references=False).startswith(
        "It is 330 metres tall, 95 [unsupported] wide [1]. It opened in 1889 [2][1]!"
    )
    weak_part = supported_result([0.9, 0.9, 0.3, 0.1, 0.1, 0.1, 0.1, *[0.9] * 6], answer)
    assert weak_part.citations(min_share=0.5)[0].status == "weak"  # its held part's support: 0.4
    assert weak_part.cited_answer(min_share=0.5, references=False).startswith(
        "It is 330 metres tall, 95 [unsupported] wide [1][weak]."
    )


def test_an_unheld_name_in_a_held_sentence_is_tagged_weak_where_it_stands() -> None:
    answer = "It is 330 metres tall in Lyon. It opened in 1889! Bread <3"
    result = supported_result([0.9] * 13, answer)
    first = result.citations(min_share=0.5)[0]
    assert first.status == "partial" and [c.text for c in first.unheld_claims] == ["Lyon"]
    assert first.support == pytest.approx(0.25)  # an unheld name caps the whole sentence, as before
    assert result.cited_answer(min_share=0.5, references=False).startswith(
        "It is 330 metres tall in Lyon [weak] [1]."
    )
    page = result.cited_answer("html", min_share=0.5)
    assert '<mark class="rc-unheld"' in page and 'Lyon</mark><sup class="rc-status rc-weak"' in page


def test_an_answer_engines_markers_are_neither_claims_nor_tokens_of_its_sentence() -> None:
    """Issue 59: ``[4]`` (three documents) made the sentence unsupported, whatever it said."""
    answer = "It is 330 metres tall [4]. It opened in 1889! Bread <3"
    support = [0.9, 0.9, 0.9, 0.9, 0.9, 0.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]
    first = supported_result(support, answer).citations(min_share=0.5)[0]
    assert [c.text for c in first.claims] == ["330"] and first.support == pytest.approx(0.9)
    assert first.status == "supported" and [s.number for s in first.sources] == [1]


def test_claims_of_a_model_run_are_checked_against_documents_and_question_not_labels(llama) -> None:
    """Issue 59: each document is labelled ``Document [n]:`` in the prompt, which held every number up to the
    number of documents."""
    documents = ["It began in May 1973.", "Harvard has 79."]
    inp = ContextInput(documents, "When?")
    answer = "It was May 1973. Harvard has 2 or 79."
    result = RCAttributor(llama, char_tokenizer()).attribute(inp, answer, output_granularity="sentence")
    assert result.evidence == [*documents, inp.question]
    claims = [(c.text, c.held) for citation in result.citations() for c in citation.claims]
    assert claims == [("May 1973", True), ("2", False), ("79", True)]


def test_metadata_reaches_to_dict_and_html() -> None:
    result = sentence_result(reliance=[0.7, 0.6, 0.1])
    data = json.loads(json.dumps(result.to_dict()))
    assert data["documents"][1] == {"document": 2, "id": "doc-2", "metadata": {"source": "history.txt"}}
    page = to_html(result)
    assert "Document [1]: Eiffel Tower" in page and "<b>id</b>: doc-2" in page and "history.txt" in page
    assert "&lt;b&gt;on time&lt;/b&gt;" in page and "<b>on time</b>" not in page
    assert 'id="cited"' in page and "rc-source-1" in page


def test_the_page_shows_metadata_values_as_a_reader_reads_them() -> None:
    import datetime

    metadata = {"title": b"Caf\xc3\xa9", "published": datetime.date(2024, 5, 1), "pages": (3, 4)}
    documents = [Document(CITED_DOCUMENTS[0].text, metadata), *CITED_DOCUMENTS[1:]]
    page = to_html(made_result(SENTENCES, SENTENCE_ROWS, documents=documents))
    assert "<b>title</b>: Café" in page and "b&#x27;" not in page
    assert "<b>published</b>: 2024-05-01" in page and "<b>pages</b>: [3, 4]" in page


def test_citations_from_a_model_run(llama) -> None:
    documents = [
        {"page_content": "Paris is the capital of France. It is large.", "metadata": {"title": "France"}},
        SimpleNamespace(page_content="Berlin is in Germany.", metadata={"source": "de.txt"}, id="d2"),
    ]
    inp = ContextInput(documents, "What is the capital?")
    model, tokenizer = llama, char_tokenizer()
    result = RCAttributor(model, tokenizer).attribute(
        inp, "Paris is. Berlin too.", granularity="sentence", output_granularity="sentence"
    )
    assert [d.metadata for d in result.documents] == [{"title": "France"}, {"source": "de.txt"}]
    citations = result.citations(sentences=2, min_support=0)  # a random model: its support is arbitrary
    assert [c.text for c in citations] == ["Paris is.", "Berlin too."]
    for citation in citations:
        assert (
            citation.status in ("supported", "partial", "weak", "unsupported") and 0 <= citation.support <= 1
        )
        assert result.answer[citation.start : citation.end] == citation.text
        assert 1 <= len(citation.sources) <= 2 and citation.context_reliance is not None
        for cited in citation.sources:
            assert cited.score == pytest.approx(
                float(result.document_scores(citations.index(citation))[cited.number - 1])
            )
            for span in cited.spans:
                assert result.chunks[cited.number - 1][span.start : span.end] == span.text
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
    tokens = _tokens(CITED_ANSWER)
    sentence_of = [next(i for i, s in enumerate(SENTENCES) if s.start <= t.end - 1 < s.end) for t in tokens]
    assert sentence_of.count(1) == 5  # " It", " opened", " in", " 1889", "!"
    # the tokens of sentence 2 differ, but average to its row: (2 * first + 2 * second + row) / 5
    second = iter([[0.9, 0.0, 0.1, 0.0], [0.0, 0.0, 1.0, 0.0]] * 2 + [SENTENCE_ROWS[1]])
    rows = [next(second) if sentence == 1 else SENTENCE_ROWS[sentence] for sentence in sentence_of]
    reliance = [[0.7, 0.6, 0.1][sentence] for sentence in sentence_of]
    result, by_sentence = made_result(tokens, rows, reliance), sentence_result([0.7, 0.6, 0.1])
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
    answer = CITED_ANSWER[:41]  # "It is 330 metres tall. It opened in 1889!"
    sentences = sentence_spans(answer)
    rows = SentenceRows(sentences, torch.tensor([[0.7, 0.2, 0.1, 0.0], [0.1, 0.0, 0.9, 0.0]]), None)
    result = made_result([whole_span(answer)], [[0.3, 0.27, 0.43, 0.0]], answer=answer)
    result.sentence_rows = rows
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cited = [[source.number for source in citation.sources] for citation in result.citations()]
        assert cited == [[1], [2]]
        assert result.cited_answer(references=False) == "It is 330 metres tall [1]. It opened in 1889 [2]!"


def test_a_unit_over_sentences_without_their_rows_is_cited_once_at_its_end_and_says_why() -> None:
    # the whole answer's best sentence of document 1 draws 0.5, document 2 0.33: the rule cites document 1 only;
    # the result has no rows of the sentences (as with given character spans), so they are cited together
    result = made_result([whole_span(CITED_ANSWER)], [[0.5, 0.17, 0.33, 0.0]])
    with pytest.warns(
        UserWarning, match=r"3 sentences of the answer are cited together.*output_granularity='answer'"
    ):
        (citation,) = result.citations()
    assert (citation.start, citation.end, citation.text, citation.n_sentences) == (
        0,
        len(CITED_ANSWER),
        CITED_ANSWER,
        3,
    )
    assert [cited.number for cited in citation.sources] == [1]
    with pytest.warns(UserWarning, match="3 sentences of the answer are cited together") as caught:
        assert result.cited_answer() == CITED_ANSWER + " [1]\n\nSources:\n[1] Eiffel Tower"
    assert caught[0].filename == __file__  # the warning points at the caller
    one = made_result([whole_span(CITED_ANSWER[:22])], [SENTENCE_ROWS[0]], answer=CITED_ANSWER[:22])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an answer of one sentence is cited per sentence: no warning
        assert one.cited_answer(references=False) == "It is 330 metres tall [1]."


def test_citations_per_sentence_from_a_model_run_whatever_the_output_units(llama) -> None:
    inp = ContextInput(["Paris is the capital of France.", "Berlin is in Germany."], "What is the capital?")
    attributor = RCAttributor(llama, char_tokenizer())
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


def test_a_cited_source_is_numbered_as_its_mark_and_its_old_index_warns() -> None:
    (first,) = sentence_result(reliance=[0.7, 0.6, 0.1]).citations(sentences=1, min_support=0)[:1]
    source = first.sources[0]
    assert "document" not in {f.name for f in dataclasses.fields(source)}
    with pytest.warns(
        DeprecationWarning, match=r"CitedSource.document \(counted from 0\) goes in rcattr 0.3.0"
    ):
        assert source.document == source.number - 1
