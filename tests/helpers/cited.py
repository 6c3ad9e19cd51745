"""Hand-made results with documents that carry metadata, for the citation tests: three documents, a
three-sentence answer and each sentence's scores."""

from __future__ import annotations

import re
from dataclasses import replace

import torch

from rcattr.attribution.result import RCAttributionResult
from rcattr.record.attributed import AttributedAnswer, AttributedContext
from rcattr.text.documents import Document, as_document
from rcattr.text.segmentation import TextSpan, sentence_spans, whole_span
from tests.helpers.results import rc_signals

CITED_DOCUMENTS = [
    Document(
        "The tower is 330 metres tall. It is in Paris.", {"title": "Eiffel Tower", "url": "https://x.org/e"}
    ),
    Document("It opened in 1889 <b>on time</b>.", {"source": "history.txt"}, id="doc-2"),
    Document("Bread is baked daily."),
]


def steam_engine_chunks() -> list[Document]:
    """:data:`CITED_DOCUMENTS`' texts as LangChain-like chunks: the first two of one article ("Steam engine",
    ids ``Steam_engine-11`` and ``-12``), the third of another ("Boiler")."""
    chunks = [
        {"page_content": document.text, "metadata": {"title": title}, "id": identifier}
        for document, title, identifier in zip(
            CITED_DOCUMENTS,
            ["Steam engine", "Steam engine", "Boiler"],
            ["Steam_engine-11", "Steam_engine-12", "Boiler-3"],
            strict=True,
        )
    ]
    return [as_document(chunk, index) for index, chunk in enumerate(chunks)]


CITED_ANSWER = "It is 330 metres tall. It opened in 1889! Bread <3"


def document_spans() -> list[TextSpan]:
    """Four context spans: the first document's two sentences, then each other document whole."""
    pieces = [
        (0, "The tower is 330 metres tall."),
        (0, "It is in Paris."),
        (1, CITED_DOCUMENTS[1].text),
        (2, CITED_DOCUMENTS[2].text),
    ]
    return [
        TextSpan(CITED_DOCUMENTS[d].text.index(t), CITED_DOCUMENTS[d].text.index(t) + len(t), t, d)
        for d, t in pieces
    ]


# each answer sentence's scores over document_spans(): sentence 1 cites document 1 (0.8; document 2 has 0.15),
# sentence 2 documents 2 (0.55) and 1 (0.45), sentence 3 nothing; each document's score is on one of its spans,
# so its share is the same summed or as its best span's
SENTENCE_ROWS = [[0.8, 0.0, 0.15, 0.05], [0.45, 0.0, 0.55, 0.0], [0.0, 0.0, 0.0, 0.0]]


SENTENCES = [
    TextSpan(0, 22, CITED_ANSWER[:22]),
    TextSpan(23, 41, CITED_ANSWER[23:41]),
    TextSpan(42, 50, CITED_ANSWER[42:]),
]


def made_result(
    outputs: list[TextSpan],
    rows: list[list[float]],
    reliance: list[float] | None = None,
    documents: list[Document] = CITED_DOCUMENTS,
    answer: str = CITED_ANSWER,
    spans: list[TextSpan] | None = None,
) -> RCAttributionResult:
    """A result of ``rows`` (one per output unit of ``outputs``) over ``spans`` of ``documents``."""
    token_attr = torch.tensor(rows)
    return RCAttributionResult(
        token_attr.mean(0),
        token_attr,
        context=AttributedContext(documents, document_spans() if spans is None else spans),
        output=AttributedAnswer(answer, outputs, [TextSpan(0, 2, answer[:2])]),
        span_scorer="attention",
        rc=None if reliance is None else rc_signals(1, len(outputs), reliance=reliance),
    )


def sentence_result(reliance: list[float] | None = None) -> RCAttributionResult:
    """The answer's three sentences as its units, with :data:`SENTENCE_ROWS` and each one's ``reliance``."""
    return made_result(SENTENCES, SENTENCE_ROWS, reliance)


def supported_result(support: list[float], answer: str = CITED_ANSWER) -> RCAttributionResult:
    """The hand-made result with one answer token per word, of the given token support: ``answer``'s three
    sentences, with :data:`SENTENCE_ROWS`."""
    assert len(sentence_spans(answer)) == len(SENTENCE_ROWS)
    result = made_result(sentence_spans(answer), SENTENCE_ROWS, [0.7, 0.6, 0.6], answer=answer)
    words = [TextSpan(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", answer)]
    assert len(words) == len(support)
    result.answer_tokens = words
    result.rc = replace(
        rc_signals(len(words), 3, reliance=[0.7, 0.6, 0.6]), token_support=torch.tensor(support)
    )
    return result


def titled_result(metadata: dict[str, object], answer: str = "It is tall.") -> RCAttributionResult:
    """``answer``'s sentences, each all on one document with ``metadata``."""
    documents = [Document("The tower is tall.", metadata)]
    return made_result(
        sentence_spans(answer),
        [[1.0]] * len(sentence_spans(answer)),
        documents=documents,
        answer=answer,
        spans=[whole_span(documents[0].text)],
    )
