"""One verdict per answer sentence (rcattr.grounding.verdict): the citations' status, the verdict and
claim_verdict agree, by the probe where one fits the model and by token support elsewhere."""

from __future__ import annotations

import pytest

from rcattr.attribution.attributor import RCAttributor
from rcattr.grounding.citation_rule import CitationRule
from rcattr.grounding.probe import SupportProbe, model_identity
from rcattr.text.prompting import ContextInput
from tests.helpers.claims import synthetic_claims

INPUTS = ContextInput(["The cat sat on the mat in 1971. The dog ran."], "What did the cat do?")
ANSWER = "The cat sat on the mat. It sat there in 1974."


def _probe(model) -> SupportProbe:
    name, layers, heads = model_identity(model)
    claims, labels = synthetic_claims(30, 0, shape=(layers, heads))
    return SupportProbe.fit(claims, labels, name)


def test_without_a_probe_the_verdict_restates_the_status(llama, tokenizer) -> None:
    attributor = RCAttributor(llama, tokenizer, probe=None)
    citations = attributor.attribute(INPUTS, target=ANSWER).citations()
    for citation in citations:
        assert citation.verdict is not None and citation.verdict.by == "support"
        assert citation.verdict.marked == (citation.status != "supported")
        assert citation.verdict.attributable == citation.support
    assert "not in the documents: '1974'" in citations[1].verdict.reason  # type: ignore[union-attr]


def test_with_a_probe_every_output_follows_its_verdict(llama, tokenizer) -> None:
    probe = _probe(llama)
    attributor = RCAttributor(llama, tokenizer, probe=probe)
    result = attributor.attribute(INPUTS, target=ANSWER)
    first, second = result.citations()
    for citation in (first, second):
        verdict = citation.verdict
        assert verdict is not None and verdict.by == "probe"
        assert verdict.marked == (citation.status != "supported")
    # the changed year is vetoed whatever the probe says, and named
    assert second.verdict.marked and second.verdict.reason == "not in the documents: '1974'"  # type: ignore[union-attr]
    if not first.verdict.marked:  # type: ignore[union-attr]
        assert first.status == "supported" and "at or above the balanced cut" in first.verdict.reason  # type: ignore[union-attr]
    cited = result.cited_answer()
    assert "[unsupported" in cited or "[weak" in cited


def test_a_stricter_operating_point_marks_no_fewer_sentences(llama, tokenizer) -> None:
    attributor = RCAttributor(llama, tokenizer, probe=_probe(llama))
    result = attributor.attribute(INPUTS, target=ANSWER)
    marks = {
        point: [c.verdict.marked for c in result.citations(CitationRule(verdict=point))]  # type: ignore[union-attr]
        for point in ("lenient", "balanced", "strict")
    }
    assert all(
        a <= b <= c for a, b, c in zip(marks["lenient"], marks["balanced"], marks["strict"], strict=True)
    )
    with pytest.raises(ValueError, match="unknown verdict 'loose'"):
        CitationRule(verdict="loose")


def test_a_probe_of_another_model_is_refused(llama, tokenizer) -> None:
    claims, labels = synthetic_claims(20, 1, shape=model_identity(llama)[1:])
    other = SupportProbe.fit(claims, labels, "another-model")
    with pytest.raises(ValueError, match="not on"):
        RCAttributor(llama, tokenizer, probe=other)
    with pytest.raises(ValueError, match="give a SupportProbe, 'shipped' or None"):
        RCAttributor(llama, tokenizer, probe="mine")  # type: ignore[arg-type]
