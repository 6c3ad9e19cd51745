"""The Python client: the library's Citation objects from the service, documents in any shape the library reads,
and the service's refusals as ServiceError."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from rcattr import Citation
from rcattr.client import CitationClient, ServiceError, citation_of
from rcattr.serve.app import create_app
from rcattr.serve.citing import citation_json
from rcattr.serve.config import ServeConfig
from tests.helpers import char_tokenizer, tiny_model
from tests.helpers.serving import (
    REQUESTS,
    GatedAttributor,
    assert_close,
    released,
    served,
    single_call,
    wait_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:no selected head sees the context")


@dataclass
class LangChainDocument:  # the shape of langchain_core.documents.Document
    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def gated() -> GatedAttributor:
    return GatedAttributor(tiny_model("llama"), char_tokenizer())


def test_cite_returns_the_library_s_citations(gated: GatedAttributor) -> None:
    documents = [
        LangChainDocument("The tower is 330 m tall.", {"source": "tower.txt"}),
        "Fuji erupted in 1707.",
    ]
    with served(create_app(gated)) as url, CitationClient(url) as client:
        cited = client.cite(
            documents, "How tall?", answer="It is 330 m tall. In 1707.", sentences=1, min_support=0
        )
        health = client.health()
    expected = single_call(
        gated,
        {
            "documents": [
                {"text": "The tower is 330 m tall.", "metadata": {"source": "tower.txt"}},
                documents[1],
            ],
            "question": "How tall?",
            "answer": "It is 330 m tall. In 1707.",
            "sentences": 1,
            "min_support": 0,
        },
    )
    assert all(isinstance(citation, Citation) for citation in cited.citations)
    library = [  # the service's sources repeat `number` as the deprecated `document`, which the library leaves out
        {
            **served,
            "sources": [{k: v for k, v in source.items() if k != "document"} for source in served["sources"]],
        }
        for served in expected["citations"]
    ]
    assert_close([dataclasses.asdict(citation) for citation in cited.citations], library)
    assert cited.citations[0].sources[0].number == 1
    assert all(
        citation_of(item) == citation for item, citation in zip(_json(cited), cited.citations, strict=True)
    )
    assert cited.cited_answer == expected["cited_answer"] and cited.documents == expected["documents"]
    assert cited.citations[0].sources[0].metadata == {"source": "tower.txt"}
    assert health["served"] == 1


def _json(cited: Any) -> list[dict[str, Any]]:
    """The citations as the service sent them (a round trip through JSON keeps every value)."""
    return json.loads(json.dumps([citation_json(citation) for citation in cited.citations]))


def test_refusals_are_service_errors_with_the_reason(gated: GatedAttributor) -> None:
    with served(create_app(gated)) as url, CitationClient(url) as client:
        with pytest.raises(ServiceError, match="documents\\[0\\]: the document is empty") as refused:
            client.cite(["  "], answer="x")
        model = client.model()
    assert refused.value.status == 422 and model["window"] == 256


def test_busy_is_retried_after_its_retry_after_then_raised(gated: GatedAttributor) -> None:
    from concurrent.futures import ThreadPoolExecutor

    body = REQUESTS[0]
    gated.gate.clear()
    app = create_app(gated, ServeConfig(queue_size=1, max_batch_size=1))
    with served(app) as url, released(gated), ThreadPoolExecutor(2) as pool:
        with CitationClient(url, busy_retries=0) as impatient, CitationClient(url) as patient:
            first = pool.submit(patient.cite, body["documents"], answer=body["answer"])
            wait_for(gated.entered.is_set)
            second = pool.submit(patient.cite, body["documents"], answer=body["answer"])
            wait_for(lambda: impatient.health()["queued"] == 1)
            with pytest.raises(ServiceError) as busy:
                impatient.cite(body["documents"], answer=body["answer"])
            gated.gate.set()
            assert first.result().answer == second.result().answer == body["answer"]
    assert busy.value.status == 503 and busy.value.retry_after is not None and busy.value.retry_after >= 1
