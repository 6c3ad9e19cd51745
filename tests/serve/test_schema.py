"""The request body: documents as the library reads them, the citation rule, and what pydantic refuses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rcattr.grounding.citations import MAX_SOURCES, MIN_SHARE
from rcattr.grounding.vouching import UNSUPPORTED_BELOW
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


def test_the_rule_defaults_to_the_library_s() -> None:
    rule = CiteRequest(documents=["x"]).rule()
    assert rule == {
        "min_share": MIN_SHARE,
        "max_sources": MAX_SOURCES,
        "min_reliance": 0.0,
        "sentences": 0,
        "min_support": UNSUPPORTED_BELOW,
    }


@pytest.mark.parametrize(
    ("body", "found"),
    [
        ({"documents": ["x", 3]}, "documents[1] is a int"),
        ({"documents": []}, "at least 1"),
        ({"documents": ["x"], "style": "latex"}, "style"),
        ({"documents": ["x"], "min_share": 0}, "min_share"),
        ({"documents": ["x"], "unknown": 1}, "unknown"),
    ],
)
def test_malformed_requests_are_refused_naming_the_field(body: dict, found: str) -> None:
    with pytest.raises(ValidationError, match=found.replace("[", r"\[")):
        CiteRequest.model_validate(body)
