"""Documents as RAG frameworks hold them (Haystack's content + meta) and the labels a source list shows."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from rcattr import ContextInput
from rcattr.documents import Document, as_document

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
