"""The request body: documents as the library reads them, the citation rule, and what pydantic refuses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rcattr.grounding.citation_rule import CitationRule
from rcattr.serve.schema import CiteRequest
from rcattr.text.prompting import ContextInput


def test_documents_reach_the_library_with_their_metadata_and_ids() -> None:
    request = CiteRequest.model_validate(
        {
            "documents": [
                "plain",
                {"page_content": "chain", "metadata": {"source": "a.pdf"}, "id": 7, "type": "Document"},
                {"text": "index", "meta": {"title": "T"}, "id_": "n1"},
                {"content": "stack"},
            ]
        }
    )
    documents = ContextInput(request.library_documents()).documents
    assert [document.text for document in documents] == ["plain", "chain", "index", "stack"]
    assert documents[1].metadata == {"source": "a.pdf"} and documents[1].id == "7"
    assert documents[2].metadata == {"title": "T"} and documents[2].id == "n1"


def test_the_documents_rag_frameworks_write_are_read_whole() -> None:
    """Every field LangChain's, LlamaIndex's and Haystack's serialisations write is accepted (and not read)."""
    langchain = {"id": None, "metadata": {"source": "a.pdf"}, "page_content": "chain", "type": "Document"}
    llama_index = {
        "id_": "n1",
        "embedding": None,
        "metadata": {"file_name": "b.txt"},
        "excluded_embed_metadata_keys": [],
        "excluded_llm_metadata_keys": [],
        "relationships": {},
        "metadata_template": "{key}: {value}",
        "metadata_separator": "\n",
        "text": "index",
        "mimetype": "text/plain",
        "start_char_idx": 0,
        "end_char_idx": 5,
        "text_template": "{metadata_str}\n\n{content}",
        "class_name": "TextNode",
    }
    haystack = {
        "id": "c0ffee",
        "content": "stack",
        "blob": None,
        "meta": {"title": "H"},
        "score": 0.5,
        "embedding": None,
        "sparse_embedding": None,
    }
    request = CiteRequest.model_validate({"documents": [langchain, llama_index, haystack]})
    documents = ContextInput(request.library_documents()).documents
    assert [(document.text, dict(document.metadata)) for document in documents] == [
        ("chain", {"source": "a.pdf"}),
        ("index", {"file_name": "b.txt"}),
        ("stack", {"title": "H"}),
    ]


def test_the_rule_defaults_to_the_library_s() -> None:
    assert CiteRequest(documents=["x"]).rule() == CitationRule()
    chosen = CiteRequest(documents=["x"], min_share=0.5, style="markdown", references=False).rule()
    assert chosen == CitationRule(min_share=0.5, style="markdown", references=False)


@pytest.mark.parametrize(
    ("body", "found"),
    [
        ({"documents": ["x", 3]}, "documents[1] is a int"),
        ({"documents": []}, "at least 1"),
        ({"documents": ["x"], "style": "latex"}, "style"),
        ({"documents": ["x"], "min_share": 0}, "min_share"),
        ({"documents": ["x"], "unknown": 1}, "unknown"),
        ({"documents": ["x"], "min_share": float("nan")}, "(?s)min_share.*finite number"),
        ({"documents": ["x"], "min_support": float("inf")}, "(?s)min_support.*finite number"),
        ({"documents": ["x"], "question": "why\x00"}, "(?s)question.*NUL character"),
        ({"documents": ["x", {"text": "y", "metdata": {}}]}, "documents[1] has an unknown field 'metdata'"),
        ({"documents": [{"content": "y", "author": "A"}]}, "documents[0] has an unknown field 'author'"),
    ],
)
def test_malformed_requests_are_refused_naming_the_field(body: dict, found: str) -> None:
    with pytest.raises(ValidationError, match=found.replace("[", r"\[")):
        CiteRequest.model_validate(body)
