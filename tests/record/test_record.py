"""The record of an attribution (rcattr.record.record): data and captum's fields, the RC signals read from it,
and nothing computed from it (that is grounding's and the views', which RCAttributionResult delegates to)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from captum.attr import LLMAttributionResult

from rcattr.attribution.result import RCAttributionResult
from rcattr.record.attributed import AttributedAnswer, AttributedContext
from rcattr.record.record import AttributionRecord
from tests.helpers.results import rc_signals, text_span

CHUNKS = ["The tower is 330 metres tall.", "It opened in 1889."]
ANSWER = "It is 330 metres tall."


def record(rc: bool = True) -> AttributionRecord:
    spans = [text_span(CHUNKS[0], CHUNKS[0]), text_span(CHUNKS[1], CHUNKS[1], 1)]
    token_attr = torch.tensor([[0.8, 0.2]])
    signals = dataclasses.replace(rc_signals(2, 1), lexical_share=0.25) if rc else None
    return AttributionRecord(
        token_attr[0],
        token_attr,
        context=AttributedContext.of_texts(CHUNKS, spans),
        output=AttributedAnswer(
            ANSWER, [text_span(ANSWER, ANSWER)], [text_span(ANSWER, "It"), text_span(ANSWER, "is")]
        ),
        span_scorer="attention",
        rc=signals,
    )


def test_a_record_holds_the_scores_and_the_spans_they_refer_to() -> None:
    made = record()
    assert isinstance(made, LLMAttributionResult)
    assert made.chunks == CHUNKS and made.answer == ANSWER and made.input_tokens == CHUNKS
    assert [span.text for span, _ in made.top(1)] == [CHUNKS[0]]
    assert made.scores(0).tolist() == pytest.approx([0.8, 0.2])
    assert repr(made).startswith("AttributionRecord(2 spans x 1 outputs, scorer='attention'")


def test_its_rc_signals_are_read_from_rc_and_none_for_a_baseline() -> None:
    made, baseline = record(), record(rc=False)
    assert made.lexical_share == 0.25 and made.token_support is made.rc.token_support
    assert (
        baseline.lexical_share is None
        and baseline.head_selection is None
        and baseline.context_reliance is None
    )
    with pytest.raises(AttributeError, match="lexical_share is one of the result's RC signals"):
        made.lexical_share = 0.5  # type: ignore[misc]


def test_nothing_is_computed_on_the_record_itself() -> None:
    """Grounding and views take a record; the result is the record with them as methods."""
    for derived in ("citations", "cited_answer", "unsupported_tokens", "to_dict", "to_dataframe"):
        assert not hasattr(AttributionRecord, derived) and hasattr(RCAttributionResult, derived)
    assert issubclass(RCAttributionResult, AttributionRecord)
