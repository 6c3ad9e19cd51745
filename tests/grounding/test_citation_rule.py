"""The citation rule (rcattr.grounding.citation_rule): one frozen object with the defaults, checked when made, read
by the result, the cited answer and the service."""

from __future__ import annotations

import dataclasses

import pytest

from rcattr.grounding.citation_rule import CITATION_STYLES, DEFAULT_RULE, CitationRule
from rcattr.grounding.vouching import UNSUPPORTED_BELOW
from tests.helpers.cited import sentence_result


def test_the_defaults_are_the_measured_rule() -> None:
    assert DEFAULT_RULE == CitationRule(0.8, 3, 0.0, 0, UNSUPPORTED_BELOW, "[n]", True)
    assert CITATION_STYLES == ("[n]", "markdown", "html")
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_RULE.min_share = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("min_share", 0, "min_share must be in"),
        ("max_sources", 0, "max_sources must be a whole number"),
        ("max_sources", True, "max_sources must be a whole number"),
        ("min_reliance", 1.5, "min_reliance must be in"),
        ("min_support", -0.1, "min_support must be in"),
        ("sentences", -1, "sentences must be a whole number"),
        ("style", "latex", "unknown citation style 'latex'"),
    ],
)
def test_a_rule_out_of_range_names_its_field(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CitationRule(**{field: value})  # type: ignore[arg-type]


def test_the_result_reads_a_rule_or_its_fields_alike() -> None:
    result = sentence_result(reliance=[0.7, 0.6, 0.1])
    rule = CitationRule(min_share=0.5, max_sources=2, min_reliance=0.3, min_support=0, style="markdown")
    fields = {"min_share": 0.5, "max_sources": 2, "min_reliance": 0.3, "min_support": 0}
    assert result.citations(rule) == result.citations(**fields)
    assert result.citations(rule) != result.citations()
    assert result.cited_answer(rule=rule) == result.cited_answer("markdown", **fields)
    assert result.cited_answer(rule=rule, references=False) == result.cited_answer(
        "markdown", references=False, **fields
    )
    with pytest.raises(TypeError):
        result.citations(min_shares=0.5)
