"""A Python client of the citation service (`rcattr serve`): the library's [`Citation`][rcattr.grounding.citations.Citation] objects,
from a model that runs in another process (httpx; the `serve` extra).

>>> with CitationClient("http://127.0.0.1:8000") as client:  # doctest: +SKIP
...     cited = client.cite(documents, "How tall is the Eiffel Tower?", answer="It is 330 metres tall.")
>>> cited.citations[0].sources[0].number, cited.citations[0].status  # doctest: +SKIP
(1, 'supported')
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rcattr.grounding.citations import Citation, CitedSource, CitedSpan
from rcattr.grounding.claims import Claim
from rcattr.text.documents import as_document, plain_json

__all__ = ["CitationClient", "ServedCitations", "ServiceError", "citation_of"]


class ServiceError(Exception):
    """The service refused or failed a request: `status` (4xx for the request, 503 busy, 500 failed),
    `detail` its one-line reason, `retry_after` its `Retry-After` seconds (503) or None."""

    def __init__(self, status: int, detail: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.retry_after = status, detail, retry_after


@dataclass(frozen=True)
class ServedCitations:
    """The service's answer to one request (`POST /v1/cite`), as library objects.

    Attributes
    ----------
    answer : str
        The answer explained (the model's own when `generated`).
    generated : bool
        Whether the model generated it (no answer was given).
    citations : list of Citation
        One per answer sentence, as `RCAttributionResult.citations` gives them.
    cited_answer : str
        The answer with its citation marks, in the style asked for.
    documents : list of dict
        Each document's `{"document" (1-based), "id", "metadata"}`.
    context_reliance, lexical_share : float or None
        The answer's context reliance; the share of the vote BM25 filled (lexical fusion on), else None.
    warnings : list of str
        The library's warnings for this request.
    result : dict or None
        The whole result (`RCAttributionResult.to_dict()`), when asked for (`include_result=True`).
    """

    answer: str
    generated: bool
    citations: list[Citation]
    cited_answer: str
    documents: list[dict[str, Any]]
    context_reliance: float | None
    lexical_share: float | None
    warnings: list[str]
    result: dict[str, Any] | None = None


class CitationClient:
    """Calls a citation service at `base_url`.

    Parameters
    ----------
    base_url : str, default "http://127.0.0.1:8000"
        Where `rcattr serve` listens.
    timeout : float, default 120
        Seconds to wait for an answer (a generated answer on a CPU takes seconds).
    busy_retries : int, default 3
        How many times a request refused as busy (503) is sent again, after its `Retry-After`.
    """

    def __init__(
        self, base_url: str = "http://127.0.0.1:8000", *, timeout: float = 120.0, busy_retries: int = 3
    ):
        try:
            import httpx
        except ImportError as error:
            raise ImportError("CitationClient needs httpx: pip install 'rcattr[serve]'") from error
        self.busy_retries = busy_retries
        self._http = httpx.Client(base_url=base_url, timeout=timeout)

    def cite(
        self, documents: Sequence[Any], question: str = "", answer: str | None = None, **options: Any
    ) -> ServedCitations:
        """Cite `answer` (None: the model answers) over `documents` (strings, [`Document`][rcattr.text.documents.Document],
        LangChain or LlamaIndex documents, mappings: what [`ContextInput`][rcattr.text.prompting.ContextInput] reads). `options`
        are the request's other fields (`granularity`, `style`, `sentences`, `min_share`, ...: see the
        service's `/docs`). Raises [`ServiceError`][rcattr.client.ServiceError] when the service refuses or fails the request."""
        body: dict[str, Any] = {
            "documents": [_document_json(item, index) for index, item in enumerate(documents)],
            "question": question,
            "answer": answer,
            **options,
        }
        data = self._request("POST", "/v1/cite", json=body)
        return ServedCitations(**{**data, "citations": [citation_of(item) for item in data["citations"]]})

    def health(self) -> dict[str, Any]:
        """`GET /healthz`: status, queued requests and counters."""
        return self._request("GET", "/healthz")

    def model(self) -> dict[str, Any]:
        """`GET /v1/model`: the model, its window, rcattr's version and the batching limits."""
        return self._request("GET", "/v1/model")

    def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        for attempt in range(self.busy_retries + 1):
            response = self._http.request(method, path, **kwargs)
            if response.status_code != 503 or attempt == self.busy_retries:
                break
            time.sleep(float(response.headers.get("Retry-After", 1)))
        if response.is_success:
            return response.json()
        try:
            detail = str(response.json()["detail"])
        except Exception:
            detail = response.text or response.reason_phrase
        retry = response.headers.get("Retry-After")
        raise ServiceError(response.status_code, detail, None if retry is None else float(retry))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> CitationClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ):
        self.close()


def _document_json(item: Any, index: int) -> str | dict[str, Any]:
    """A document as the service reads it: a string as is, any other shape the library reads as its text,
    plain-JSON metadata and id."""
    if isinstance(item, str):
        return item
    document = as_document(item, index)
    return {"text": document.text, "metadata": plain_json(document.metadata), "id": document.id}


def citation_of(data: Mapping[str, Any]) -> Citation:
    """The [`Citation`][rcattr.grounding.citations.Citation] of a response's citation (its JSON; the sources'
    deprecated `document` is left out: it repeats `number`)."""
    sources = [
        CitedSource(
            **{
                **{key: value for key, value in source.items() if key != "document"},
                "spans": [CitedSpan(**span) for span in source["spans"]],
            }
        )
        for source in data["sources"]
    ]
    return Citation(**{**data, "sources": sources, "claims": [Claim(**claim) for claim in data["claims"]]})
