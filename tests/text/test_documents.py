"""Documents as RAG frameworks hold them (Haystack's content + meta) and the labels a source list shows."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from rcattr import ContextInput
from rcattr.text.documents import Document, as_document, documents_json, source_labels
from tests.helpers.cited import (
    CITED_DOCUMENTS,
)

TEXT = "The Eiffel Tower is 330 metres tall and stands in Paris."


@pytest.mark.parametrize(
    ("metadata", "identifier", "label"),
    [
        ({"title": "Eiffel Tower", "url": "https://x.org/e"}, None, "Eiffel Tower"),
        ({"source": 0}, None, "0"),  # a falsy value is still a name
        ({"title": "", "source": "a.pdf"}, None, "a.pdf"),  # a blank one is not
        ({"title": b"Caf\xc3\xa9 \xff"}, None, "Café \ufffd"),  # bytes decoded as UTF-8
        ({"file_name": Path("b.md")}, None, "b.md"),
        ({"title": None, "source": True, "file_name": ["x"]}, "doc-7", "doc-7"),  # not names
        ({"url": "https://x.org/e"}, None, "https://x.org/e"),
        ({"url": 123}, None, "The Eiffel Tower is 330 metres tall and stands in Paris."),  # not a url
        ({}, "doc-2", "doc-2"),
        ({}, str(uuid.UUID(int=7)), TEXT),  # a generated id says less than the text
        ({}, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", TEXT),  # a sha256 digest
        ({}, "0", "0"),
    ],
)
def test_label_names_a_document_as_a_reader_would(
    metadata: dict[str, object], identifier: str | None, label: str
) -> None:
    assert Document(TEXT, metadata, identifier).label() == label


def test_label_is_cut_to_its_width() -> None:
    assert Document(TEXT).label(width=12) == "The Eiffel …"
    assert Document(TEXT, {"title": b"A long title in bytes"}).label(width=8) == "A long …"


def test_a_llama_index_node_without_an_id_of_its_own_is_labelled_by_its_text() -> None:
    node = SimpleNamespace(text=TEXT, metadata={}, id_=str(uuid.uuid4()))
    document = as_document(node, 0)
    assert document.id == node.id_ and document.label() == TEXT  # the id is kept, not shown


def test_haystack_documents_are_read_by_content_and_meta() -> None:
    haystack = SimpleNamespace(content=TEXT, meta={"title": "Eiffel"}, id="a" * 64, embedding=None)
    mapping = {"content": "Fuji.", "meta": {"source": "fuji.txt"}, "id": "h-2"}
    documents = ContextInput([haystack, mapping], "How tall?").documents
    assert documents == [
        Document(TEXT, {"title": "Eiffel"}, "a" * 64),
        Document("Fuji.", {"source": "fuji.txt"}, "h-2"),
    ]
    assert [document.label() for document in documents] == ["Eiffel", "fuji.txt"]
    with pytest.raises(
        TypeError, match=r"context document 0 \(SimpleNamespace\) has no page_content, text or content"
    ):
        as_document(
            SimpleNamespace(content=None, meta={}, blob=b"..."), 0
        )  # a Haystack document without text
    with pytest.raises(TypeError, match="context document 0: metadata must be a mapping, got list"):
        as_document({"content": "x", "meta": ["a"]}, 0)


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
    assert as_document(CITED_DOCUMENTS[1], 0) is CITED_DOCUMENTS[1]


def test_source_labels_tell_apart_chunks_of_one_article() -> None:
    chunks = [
        {
            "page_content": f"Chunk {n} of the article.",
            "metadata": {"title": "Steam engine"},
            "id": f"Steam_engine-{n}",
        }
        for n in (11, 12)
    ]
    other = {"page_content": "A boiler heats water.", "metadata": {"title": "Boiler"}, "id": "Boiler-3"}
    documents = ContextInput([*chunks, other], "Who built it?").documents
    assert source_labels(documents) == [
        "Steam engine · Steam_engine-11",
        "Steam engine · Steam_engine-12",
        "Boiler",  # a label of its own stays as it is
    ]
    assert [document.label() for document in documents[:2]] == ["Steam engine", "Steam engine"]


def test_source_labels_fall_back_on_the_first_words_without_a_readable_id() -> None:
    documents = [
        Document("Watt improved the condenser.", {"title": "Steam engine"}, str(uuid.UUID(int=1))),
        Document("Newcomen built the first one.", {"title": "Steam engine"}),
        # labelled by their id, which they share: their words follow
        Document("Newcomen built the first one.", {}, "same"),
        Document("Newcomen built the first one.", {}, "same"),
        Document("Bare text."),
        Document("Bare text."),  # the same words: nothing else tells them apart
    ]
    assert source_labels(documents) == [
        "Steam engine · Watt improved the condenser.",
        "Steam engine · Newcomen built the first one.",
        "same · Newcomen built the first one.",
        "same · Newcomen built the first one.",
        "Bare text.",
        "Bare text.",
    ]


def test_source_labels_keep_to_their_width() -> None:
    title = "A very long title that the width has to cut somewhere"
    documents = [Document("x", {"title": title}, f"{title}-{n}") for n in (1, 2)]
    labels = source_labels(documents, width=30)
    # an id cut keeps its end, where chunks of one article differ
    assert labels == ["A very long… · …ut somewhere-1", "A very long… · …ut somewhere-2"]
    assert all(len(label) == 30 for label in labels)


def test_documents_json_numbers_documents_from_one_with_plain_metadata() -> None:
    import datetime

    documents = [Document("a", {"date": datetime.date(2024, 1, 2)}, "x"), Document("b")]
    assert documents_json(documents) == [
        {"document": 1, "id": "x", "metadata": {"date": "2024-01-02"}},
        {"document": 2, "id": None, "metadata": {}},
    ]
