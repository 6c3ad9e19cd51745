"""One batch of citation requests through the library: [`attribute_many`][rcattr.attribution.base.SpanAttributor.attribute_many] over
their inputs, then each result's citations and cited answer, each request answered with its own response or
its own error, and its own warnings."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.many import SkippedInputWarning
from rcattr.attribution.result import RCAttributionResult
from rcattr.grounding.citations import Citation
from rcattr.serve.schema import CiteRequest, CiteResponse
from rcattr.text.documents import documents_json
from rcattr.text.prompting import ContextInput
from rcattr.viz.cited_answer import cited_answer

Value = TypeVar("Value")


def context_input(request: CiteRequest) -> ContextInput:
    """The library's input of `request`: its documents (strings, or objects the library reads) and question."""
    return ContextInput(request.library_documents(), request.question)


@contextmanager
def recorded() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised inside, recorded (each one, whatever the filters) rather than shown. The warnings
    module's state is the process's: only the worker's thread records (the request checks record nothing)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def with_warnings(call: Callable[[], Value]) -> tuple[Value, list[str]]:
    """`call()` and the messages of the warnings it raised."""
    with recorded() as caught:
        value = call()
    return value, [str(warning.message) for warning in caught]


def cite_many(
    attributor: RCAttributor,
    requests: Sequence[CiteRequest],
    *,
    max_batch_tokens: int | None,
    max_new_tokens: int,
) -> list[CiteResponse | Exception]:
    """Each request's response, or the exception that stopped it (the others still answered): one
    `attribute_many` over the batch (one left-padded forward per `max_batch_tokens`; a batch that fails runs
    again one request at a time). A response's `warnings` are its result's own notes, its citations', and the
    batch's generation warnings when the model answered it."""
    inputs = [context_input(request) for request in requests]
    with recorded() as caught:
        results = attributor.attribute_many(
            inputs,
            [request.answer for request in requests],
            batch_size=len(requests),
            max_batch_tokens=max_batch_tokens,
            granularity=[request.granularity for request in requests],
            output_granularity=[request.output_granularity for request in requests],
            gen_args={"max_new_tokens": max_new_tokens},
            progress=False,
            errors="skip",
        )
    failures = {
        warning.message.index: warning.message.error
        for warning in caught
        if isinstance(warning.message, SkippedInputWarning)
    }
    notes = {
        note for result in results if result is not None and result.rc is not None for note in result.rc.notes
    }
    generation = list(
        dict.fromkeys(
            text
            for warning in caught
            if not isinstance(warning.message, SkippedInputWarning)
            for text in [str(warning.message)]
            if text not in notes
        )
    )
    outcomes: list[CiteResponse | Exception] = []
    for index, (request, result) in enumerate(zip(requests, results, strict=True)):
        if result is None:
            outcomes.append(failures.get(index, RuntimeError("the request got no result")))
            continue
        try:
            outcomes.append(response(request, result, generation if request.answer is None else []))
        except Exception as error:  # this request's citations failed; the batch's others stand
            outcomes.append(error)
    return outcomes


def citation_json(citation: Citation) -> dict[str, Any]:
    """`citation` as the response gives it, its sources numbered from 1 (`number`) as the response's
    `documents` and `to_dict()` number them; `document`, the same number, is deprecated (until 0.3.0)."""
    data = dataclasses.asdict(citation)
    for source in data["sources"]:
        source["document"] = source["number"]
    return data


def response(
    request: CiteRequest, result: RCAttributionResult, batch_warnings: Sequence[str]
) -> CiteResponse:
    """The response to `request` from its result: the citations by its rule, the answer cited in its style."""

    def cite() -> tuple[list, str]:
        rule = request.rule()
        citations = result.citations(rule)
        return citations, cited_answer(result, citations, rule)

    (citations, cited), citation_warnings = with_warnings(cite)
    rc = result.rc
    return CiteResponse.model_validate(
        {
            "answer": result.answer,
            "generated": request.answer is None,
            "citations": [citation_json(citation) for citation in citations],
            "cited_answer": cited,
            "documents": documents_json(result.documents),
            "context_reliance": result.context_reliance,
            "lexical_share": None if rc is None else rc.lexical_share,
            "warnings": list(dict.fromkeys([*(rc.notes if rc else ()), *batch_warnings, *citation_warnings])),
            "result": result.to_dict() if request.include_result else None,
        }
    )
