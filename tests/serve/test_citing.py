"""One batch of requests through the library: each answered as a single call would be, or with its own error."""

from __future__ import annotations

import pytest

from rcattr import FixedHeads
from rcattr.attribution.attributor import NO_SCORES
from rcattr.serve.citing import cite_many, context_input, response, with_warnings
from rcattr.serve.schema import CiteRequest, CiteResponse
from tests.helpers import char_tokenizer, tiny_model
from tests.helpers.serving import REQUESTS, GatedAttributor, assert_close, single_call

pytestmark = pytest.mark.filterwarnings("ignore:no selected head sees the context")


def _cite(attributor, bodies, max_batch_tokens=8192):
    requests = [CiteRequest.model_validate(body) for body in bodies]
    return cite_many(attributor, requests, max_batch_tokens=max_batch_tokens, max_new_tokens=8)


def test_a_batch_answers_each_request_as_a_single_call(gated: GatedAttributor) -> None:
    outcomes = _cite(gated, REQUESTS)
    assert gated.batch_sizes == [len(REQUESTS)]  # one forward for the batch
    for outcome, body in zip(outcomes, REQUESTS, strict=True):
        assert isinstance(outcome, CiteResponse)
        assert_close(outcome.model_dump(mode="json"), single_call(gated, body))


def test_a_failing_request_fails_alone(gated: GatedAttributor) -> None:
    bodies = [REQUESTS[0], {**REQUESTS[1], "answer": "It FAILS."}, REQUESTS[2]]
    outcomes = _cite(gated, bodies)
    assert isinstance(outcomes[1], RuntimeError) and "set to fail" in str(outcomes[1])
    for index in (0, 2):
        assert_close(outcomes[index].model_dump(mode="json"), single_call(gated, bodies[index]))


def test_each_response_carries_its_own_result_s_notes() -> None:
    # a head of a sliding layer (5 tokens) sees none of the documents from the answer: every span scores 0
    blind = GatedAttributor(tiny_model("gemma3"), char_tokenizer(), heads=FixedHeads([(0, 0)]))
    outcomes = _cite(blind, REQUESTS[:2])
    for outcome in outcomes:
        assert isinstance(outcome, CiteResponse)
        assert NO_SCORES in outcome.warnings


def test_generation_warnings_go_to_the_requests_the_model_answered(gated: GatedAttributor) -> None:
    # the prompt (193 characters) leaves fewer than 128 positions of the window of 256
    bodies = [{**REQUESTS[0], "answer": None}, REQUESTS[1]]
    requests = [CiteRequest.model_validate(body) for body in bodies]
    outcomes = cite_many(gated, requests, max_batch_tokens=None, max_new_tokens=128)
    assert outcomes[0].generated and any(
        "max_new_tokens=128 lowered" in text for text in outcomes[0].warnings
    )
    assert not outcomes[1].generated and not any("lowered" in text for text in outcomes[1].warnings)


def test_the_whole_result_comes_when_asked(gated: GatedAttributor) -> None:
    (outcome,) = _cite(gated, [{**REQUESTS[0], "include_result": True}])
    assert outcome.result is not None and outcome.result["answer"] == REQUESTS[0]["answer"]
    assert len(outcome.result["seq_attr"]) == len(outcome.result["context_spans"])


def test_with_warnings_records_every_warning() -> None:
    import warnings

    def warn_twice() -> int:
        for _ in range(2):
            warnings.warn("same place", stacklevel=1)
        return 3

    assert with_warnings(warn_twice) == (3, ["same place", "same place"])


def test_a_source_counts_its_document_from_one_as_the_response_s_documents(gated: GatedAttributor) -> None:
    request = CiteRequest.model_validate({**REQUESTS[1], "min_share": 1e-6, "max_sources": 3})
    result = gated.attribute(context_input(request), request.answer)
    library = result.citations(request.rule())
    served = response(request, result, []).model_dump(mode="json")
    cited = [
        (source["document"], source["number"]) for item in served["citations"] for source in item["sources"]
    ]
    assert len(cited) > 1 and all(document == number for document, number in cited)  # `document`: deprecated
    assert [number for _, number in cited] == [
        source.number for citation in library for source in citation.sources
    ]
    assert {document for document, _ in cited} <= {document["document"] for document in served["documents"]}


def test_each_citation_carries_its_verdict_and_the_requested_operating_point(gated: GatedAttributor) -> None:
    request = CiteRequest.model_validate({**REQUESTS[1], "verdict": "strict"})
    assert request.rule().verdict == "strict"
    result = gated.attribute(context_input(request), request.answer)
    served = response(request, result, []).model_dump(mode="json")
    for item, citation in zip(served["citations"], result.citations(request.rule()), strict=True):
        assert citation.verdict is not None
        assert item["verdict"] == {
            "attributable": citation.verdict.attributable,
            "marked": citation.verdict.marked,
            "by": citation.verdict.by,
            "reason": citation.verdict.reason,
        }
        assert item["verdict"]["marked"] == (item["status"] != "supported")
    with pytest.raises(ValueError, match="verdict"):
        CiteRequest.model_validate({**REQUESTS[1], "verdict": "loose"})
