"""One verdict per answer sentence (rcattr.grounding.verdict): the citations' status, the verdict and
claim_verdict agree, by the probe where one fits the model and by token support elsewhere."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.claim_checks import claim_verdict
from rcattr.grounding.citation_rule import CitationRule
from rcattr.grounding.probe import SupportProbe, model_identity
from rcattr.serve.app import create_app
from rcattr.text.prompting import ContextInput
from tests.helpers.claims import synthetic_claims
from tests.helpers.serving import served

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


@pytest.mark.parametrize("probe", [None, "fitted"])
def test_the_verdict_does_not_depend_on_the_vote(llama, tokenizer, probe) -> None:
    """Support, held support, the verdict and the status read the tokens' support and the documents, not the
    heads' vote that BM25 fills in (the lexical default) or not."""
    fitted = None if probe is None else _probe(llama)
    documents = ["The cat sat on the mat in 1971.", "The dog ran.", "A bird sang on the roof."]
    inputs = ContextInput(documents, "What did the cat do?")
    results = [
        RCAttributor(llama, tokenizer, probe=fitted, lexical=lexical).attribute(inputs, target=ANSWER)
        for lexical in (True, False)
    ]
    fused, alone = (
        [(c.support, c.held_support, c.status, c.verdict) for c in r.citations()] for r in results
    )
    assert fused == alone
    assert results[0].rc.lexical_share is not None and results[1].rc.lexical_share is None  # type: ignore[union-attr]


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


def _quotesum_claims(n: int) -> list[tuple[ContextInput, str]]:
    """``n`` claims over a QuoteSum passage each (the record's first, its first sentences: the test runs in CI):
    summary sentences as written, and as many with a number of theirs changed, so that the verdicts mark some and
    pass others."""
    records = [json.loads(line) for line in Path("data/quotesum/dev.jsonl").read_text().splitlines()]
    claims: list[tuple[ContextInput, str]] = []
    for record in records:
        sentences = re.split(r"(?<=[.!?])\s+", record["source1"])
        sources = [" ".join(sentences[:3])]
        summary = re.sub(r"\[ \d+ (.*?) \]", r"\1", record["summary"]).strip()
        inputs = ContextInput(sources, record["question"])
        claims.append((inputs, summary))
        number = re.search(r"\b\d+\b", summary)
        if number:
            claims.append((inputs, summary.replace(number.group(), str(int(number.group()) + 7), 1)))
        if len(claims) >= n:
            return claims[:n]
    return claims


@pytest.mark.real_model
@pytest.mark.slow
def test_every_output_gives_the_same_verdict_on_fifty_claims(smollm2) -> None:
    attributor = RCAttributor(*smollm2)
    assert attributor.probe is not None  # shipped for the default model
    claims = _quotesum_claims(50)
    # the library's results in batches, the service's concurrent requests batched by its worker
    results = attributor.attribute_many(
        [inputs for inputs, _ in claims], [claim for _, claim in claims], progress=False
    )
    bodies = [
        {"documents": [d.text for d in inputs.documents], "question": inputs.question, "answer": claim}
        for inputs, claim in claims
    ]
    with served(create_app(attributor, model_name="default")) as url, ThreadPoolExecutor(8) as pool:
        replies = list(
            pool.map(lambda body: httpx.post(f"{url}/v1/cite", json=body, timeout=600).json(), bodies)
        )
    marked = 0
    for (inputs, claim), result, reply in zip(claims, results, replies, strict=True):
        citations = result.citations()
        cited = result.cited_answer(references=False)
        verdict = claim_verdict(attributor, inputs, claim)
        for citation, served_citation in zip(citations, reply["citations"], strict=True):
            assert citation.verdict is not None and citation.verdict.by == "probe"
            assert citation.verdict.marked == (citation.status != "supported")
            assert served_citation["status"] == citation.status
            assert served_citation["verdict"]["marked"] == citation.verdict.marked
        any_marked = any(c.verdict.marked for c in citations)  # type: ignore[union-attr]
        assert verdict.marked == any_marked
        assert ("[weak" in cited or "[unsupported" in cited) == any_marked, cited
        marked += any_marked
    assert 0 < marked < 50  # the test set holds both kinds


@pytest.mark.real_model
def test_a_verbatim_sentence_among_twelve_passages_passes_and_its_changed_year_is_marked(smollm2) -> None:
    attributor = RCAttributor(*smollm2)
    records = [json.loads(line) for line in Path("data/quotesum/dev.jsonl").read_text().splitlines()]
    passages = [r[f"source{i}"] for r in records for i in range(1, 9) if r.get(f"source{i}")]
    source = next(p for p in passages if "Regulators killed William Brady" in p)
    sentence = next(s for s in re.split(r"(?<=[.!?])\s+", source) if "Regulators killed" in s)
    others = [p for p in dict.fromkeys(passages) if p != source][:11]
    among_twelve = ContextInput([*others[:5], source, *others[5:]], "Who killed William Brady?")
    assert not claim_verdict(attributor, among_twelve, sentence).marked
    year = re.search(r"\b1[89]\d\d\b", sentence).group()  # type: ignore[union-attr]
    changed = sentence.replace(year, str(int(year) + 3))
    verdict = claim_verdict(attributor, ContextInput([source], "Who killed William Brady?"), changed)
    assert verdict.marked and verdict.reason == f"not in the documents: '{int(year) + 3}'"
    cited = attributor.attribute(ContextInput([source], ""), target=changed).cited_answer()
    assert f"{int(year) + 3} [unsupported]" in cited
