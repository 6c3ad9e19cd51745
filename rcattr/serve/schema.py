"""The service's request and response bodies (pydantic, for FastAPI's validation and OpenAPI schema): they
mirror the library's objects, a request [`attribute`][rcattr.attribution.base.SpanAttributor.attribute]'s arguments and
[`citations`][rcattr.attribution.result.RCAttributionResult.citations]' rule, a response [`Citation`][rcattr.grounding.citations.Citation] and
[`to_dict`][rcattr.attribution.result.RCAttributionResult.to_dict]'s documents."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rcattr.grounding.citation_rule import DEFAULT_RULE, CitationRule, CitationStyle
from rcattr.text.documents import TEXT_FIELDS
from rcattr.text.prompting import check_text

# Fields that LangChain's Document.model_dump(), LlamaIndex's TextNode.model_dump() / to_dict() and Haystack's
# Document.to_dict(flatten=False) write besides the text, metadata and id: accepted, and not read.
FRAMEWORK_FIELDS = frozenset(
    {
        "type",  # LangChain
        "class_name",  # LlamaIndex
        "embedding",
        "extra_info",
        "excluded_embed_metadata_keys",
        "excluded_llm_metadata_keys",
        "relationships",
        "metadata_template",
        "metadata_separator",
        "metadata_seperator",
        "text_template",
        "text_resource",
        "image_resource",
        "audio_resource",
        "video_resource",
        "start_char_idx",
        "end_char_idx",
        "mimetype",
        "hash",
        "blob",  # Haystack
        "score",
        "sparse_embedding",
        "content_type",
        "id_hash_keys",
        "dataframe",
    }
)


class DocumentIn(BaseModel):
    """A document as RAG frameworks serialise one: its text in `page_content` (LangChain), `text`
    (LlamaIndex) or `content` (Haystack), with optional `metadata` (or `meta`) and id. The other fields
    those frameworks write are accepted and not read (`FRAMEWORK_FIELDS`); any other field is refused, so
    that a misspelt one is not lost. The library reads it ([`rcattr.text.documents.as_document`][rcattr.text.documents.as_document]) and
    refuses one without text."""

    model_config = ConfigDict(extra="ignore")

    page_content: str | None = None
    text: str | None = None
    content: str | None = None
    metadata: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    id: str | int | None = None
    id_: str | int | None = None
    doc_id: str | int | None = None


_DOCUMENT_FIELDS = FRAMEWORK_FIELDS | DocumentIn.model_fields.keys()
_RULE_FIELDS = tuple(field.name for field in dataclasses.fields(CitationRule))


class CiteRequest(BaseModel):
    """`POST /v1/cite`: the documents, the question and the answer to explain (None: the model answers),
    how the context is cut (`granularity`) and the answer explained (`output_granularity`; citations are per
    answer sentence either way), the citation rule and the cited answer's style."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    documents: list[str | DocumentIn] = Field(min_length=1, description="the retrieved documents, in order")
    question: str = ""
    answer: str | None = Field(None, description="the answer to explain; null: the model answers greedily")
    granularity: Literal["sentence", "chunk", "token"] = "sentence"
    output_granularity: Literal["answer", "sentence", "token"] = "answer"
    style: CitationStyle = DEFAULT_RULE.style
    references: bool = Field(
        DEFAULT_RULE.references, description="append the cited documents' list to cited_answer"
    )
    sentences: int = Field(
        DEFAULT_RULE.sentences,
        ge=0,
        le=20,
        description="each cited document's best spans (granularity sentence)",
    )
    min_share: float = Field(DEFAULT_RULE.min_share, gt=0, le=1)
    max_sources: int = Field(DEFAULT_RULE.max_sources, ge=1)
    min_reliance: float = Field(DEFAULT_RULE.min_reliance, ge=0, le=1)
    min_support: float = Field(DEFAULT_RULE.min_support, ge=0, le=1)
    verdict: Literal["lenient", "balanced", "strict"] = Field(
        DEFAULT_RULE.verdict,  # type: ignore[arg-type]  # one of OPERATING_POINTS
        description="the support probe's operating point: marks at most 10%, 20% or 35% of attributable claims",
    )
    include_result: bool = Field(
        False, description="also return the whole result (RCAttributionResult.to_dict)"
    )

    @field_validator("documents", mode="before")
    @classmethod
    def _documents_are_documents(cls, documents: Any) -> Any:
        """One line naming the document that is neither a string nor an object (pydantic's union error lists
        every alternative), or the field of a document object that no framework writes."""
        if isinstance(documents, list):
            for index, document in enumerate(documents):
                if not isinstance(document, (str, dict)):
                    raise ValueError(
                        f"documents[{index}] is a {type(document).__name__}; give a string or an object with a "
                        "text, page_content or content string"
                    )
                if isinstance(document, str) or not document.keys() & TEXT_FIELDS:
                    continue  # the library names what a document without text lacks
                unknown = sorted(document.keys() - _DOCUMENT_FIELDS)
                if unknown:
                    raise ValueError(
                        f"documents[{index}] has an unknown field {unknown[0]!r}: a document object takes text "
                        "(or page_content, content), metadata (or meta) and id (or id_, doc_id); put anything "
                        "else in its metadata"
                    )
        return documents

    @field_validator("question")
    @classmethod
    def _question_is_text(cls, question: str) -> str:
        """The library's refusal of a NUL or a lone surrogate, named after the question (not the documents)."""
        check_text("question", question)
        return question

    def library_documents(self) -> list[str | dict[str, Any]]:
        """The documents as [`ContextInput`][rcattr.text.prompting.ContextInput] reads them."""
        return [
            document if isinstance(document, str) else document.model_dump(exclude_none=True)
            for document in self.documents
        ]

    def rule(self) -> CitationRule:
        """The request's citation rule and style."""
        return CitationRule(**{field: getattr(self, field) for field in _RULE_FIELDS})


class CitedSpanOut(BaseModel):
    """[`CitedSpan`][rcattr.grounding.citations.CitedSpan]: a span of a cited document, offsets into the document's text."""

    start: int
    end: int
    text: str
    score: float


class CitedSourceOut(BaseModel):
    """[`CitedSource`][rcattr.grounding.citations.CitedSource]: a cited document, `number` counted from 1 as its
    mark and the response's `documents` count it."""

    number: int
    document: int = Field(
        description="The same number as `number`; deprecated, it goes in rcattr 0.3.0", deprecated=True
    )
    score: float
    id: str | None
    metadata: dict[str, Any]
    spans: list[CitedSpanOut]


class ClaimOut(BaseModel):
    """[`rcattr.grounding.claims.Claim`][rcattr.grounding.claims.Claim]: a number, date or name of the sentence, held by the documents or not."""

    start: int
    end: int
    text: str
    kind: str
    held: bool
    support: float | None


class VerdictOut(BaseModel):
    """`rcattr.ClaimVerdict`: whether the sentence is attributable, what decided it and why."""

    attributable: float
    marked: bool
    by: str
    reason: str


class CitationOut(BaseModel):
    """[`Citation`][rcattr.grounding.citations.Citation]: one answer sentence's sources, support and status."""

    start: int
    end: int
    text: str
    sources: list[CitedSourceOut]
    context_reliance: float | None
    uncited: str | None
    n_sentences: int
    support: float | None
    status: str | None
    claims: list[ClaimOut]
    held_support: float | None
    verdict: VerdictOut | None


class DocumentOut(BaseModel):
    """A document of the response, as [`to_dict`][rcattr.attribution.result.RCAttributionResult.to_dict] lists it (1-based)."""

    document: int
    id: str | None
    metadata: dict[str, Any]


class CiteResponse(BaseModel):
    """The answer, its citations per sentence, the cited answer in the requested style, the answer-level
    signals, and the library's warnings for this request."""

    answer: str
    generated: bool = Field(description="whether the model generated the answer (no answer was given)")
    citations: list[CitationOut]
    cited_answer: str
    documents: list[DocumentOut]
    context_reliance: float | None
    lexical_share: float | None = Field(description="the share of the vote BM25 filled (lexical fusion on)")
    warnings: list[str]
    result: dict[str, Any] | None = None


class ModelInfo(BaseModel):
    """`GET /v1/model`: what the service runs."""

    model: str
    device: str
    window: int | None
    version: str
    torch_threads: int
    max_batch_size: int
    max_batch_tokens: int | None


class Health(BaseModel):
    """`GET /healthz`: the service's state and counters since it started."""

    status: Literal["ok"]
    queued: int
    served: int
    failed: int
    dropped: int = Field(description="requests whose client went away before their answer")
    batches: int
