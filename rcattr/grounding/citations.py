"""Citations: which documents (and sentences) support each sentence of an answer, as applications show them.

[`RCAttributionResult.citations`][rcattr.attribution.result.RCAttributionResult.citations] turns a result's scores
into one [`Citation`][rcattr.grounding.citations.Citation] per answer sentence, whatever unit was attributed: [`sentence_groups`][rcattr.grounding.citations.sentence_groups] pairs
the output units with the sentences they lie in (a sentence's tokens are averaged into it). A whole-answer
unit (`output_granularity="answer"`) is scored per sentence too (the result's [`SentenceRows`][rcattr.record.attributed.SentenceRows]), which
are cited instead; a unit over several sentences without such rows (given character spans, a method that
scores fewer rows) cannot be split, so they are cited once, after the last.
[`cited_sources`][rcattr.grounding.citations.cited_sources] applies the rule
([`CitationRule`][rcattr.grounding.citation_rule.CitationRule]): a sentence cites the documents whose share of its
attribution is at least `min_share` of its best document's, at most `max_sources` of them, and none when its
context reliance (the lookback ratio on the selected heads) is below `min_reliance`. The defaults were chosen
on part of QuoteSum and Veri-Gran and checked on the part held back (`python -m rcattr.eval.citations`,
docs/benchmarks/citations.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from rcattr.grounding.citation_rule import DEFAULT_RULE, CitationRule
from rcattr.grounding.claims import Claim, context_parts
from rcattr.grounding.verdict import ClaimVerdict, sentence_verdict
from rcattr.grounding.vouching import partly_held, sentence_status, sentence_vouching
from rcattr.record.attributed import SentenceRows
from rcattr.record.record import AttributionRecord
from rcattr.text.documents import Document
from rcattr.text.segmentation import TextSpan, sentence_spans


@dataclass(frozen=True)
class CitedSpan:
    """A context span (a sentence, with `granularity="sentence"`) of a cited document.

    `start` and `end` are character offsets into the document's text; `score` is the span's share of
    the unit's attribution."""

    start: int
    end: int
    text: str
    score: float


@dataclass(frozen=True)
class CitedSource:
    """A document cited for an output unit.

    Attributes
    ----------
    number : int
        The document's number, from 1: the one its mark shows (`[2]`), as the prompt (`Document [2]`), the
        table, the dict, the service's JSON and the HTML number it. `result.documents[number - 1]` is the
        document.
    score : float
        The document's share of the unit's attribution: its best span's score, normalised over the documents
        ([`document_shares`][rcattr.grounding.citations.document_shares]).
    id, metadata
        The document's own, as the input gave them.
    spans : list of CitedSpan
        The document's best spans for the unit, when asked for (`sentences=`).
    """

    number: int
    score: float
    id: str | None
    metadata: Mapping[str, Any]
    spans: list[CitedSpan] = field(default_factory=list)

    @property
    def document(self) -> int:
        """Deprecated, until rcattr 0.3.0: the 0-based index of the document (`number - 1`)."""
        warnings.warn(
            "CitedSource.document (counted from 0) goes in rcattr 0.3.0: use CitedSource.number (counted from 1, "
            "the mark's); result.documents[number - 1] is the document",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.number - 1


@dataclass(frozen=True)
class Citation:
    """The sources of one answer sentence (of several, when one output unit spans them).

    Attributes
    ----------
    start, end : int
        Character offsets of the sentence in the answer (from its first sentence's start to its last one's
        end when it covers several).
    text : str
        `answer[start:end]`.
    sources : list of CitedSource
        The cited documents, best first; empty when the unit gets no citation.
    context_reliance : float or None
        The unit's context reliance (None for baselines), which the rule compares with `min_reliance`.
    uncited : str or None
        Why the unit has no citation: `"low reliance"`, `"no context scores"` or `"unsupported"` (support
        below the rule's `min_support`); None when it has one.
    n_sentences : int
        How many answer sentences the citation covers: 1, unless an output unit of the result spans several
        and the result has no rows of its own for them ([`SentenceRows`][rcattr.record.attributed.SentenceRows]): its scores cannot be split.
    support : float or None
        How much the context vouches for the whole sentence, in [0, 1] ([`rcattr.grounding.vouching.sentence_support`][rcattr.grounding.vouching.sentence_support]; None for
        baselines, which have no token support).
    status : str or None
        What the sentence's `verdict` says: `"supported"` when it is not marked. Without a support probe,
        `"supported"`, `"weak"` (support below [`rcattr.grounding.vouching.WEAK_BELOW`][rcattr.grounding.vouching.WEAK_BELOW]) or `"unsupported"` (below
        [`UNSUPPORTED_BELOW`][rcattr.grounding.vouching.UNSUPPORTED_BELOW]: then, by default, `sources` is empty); `"partial"` when the sentence
        mixes held and unheld claims ([`partly_held`][rcattr.grounding.vouching.partly_held]) and its held part is supported; None for baselines.
        A partly held sentence's status is its held part's (`held_support`), `"partial"` in place of
        `"supported"`. With a probe (`RCAttributor(probe=...)`), a marked sentence keeps that status where it
        marks the sentence too, else is `"weak"`.
    claims : list of Claim
        The sentence's numbers, dates and names, each held by a sentence of the documents or the question as a
        whole or not ([`rcattr.grounding.claims`][rcattr.grounding.claims]).
    held_support : float or None
        The support of the sentence's held part: `support` without the tokens of its unheld claims, when
        it has a held claim too ([`partly_held`][rcattr.grounding.vouching.partly_held]); `support` otherwise. It decides the citation: a
        half-right sentence keeps the sources of its held part, and its unheld claims are marked where they
        stand.
    verdict : ClaimVerdict or None
        Whether the sentence is attributable, by the support probe where one fits the model, else by token
        support, and why (`rcattr.grounding.verdict`); None for baselines.
    """

    start: int
    end: int
    text: str
    sources: list[CitedSource]
    context_reliance: float | None
    uncited: str | None = None
    n_sentences: int = 1
    support: float | None = None
    status: str | None = None
    claims: list[Claim] = field(default_factory=list)
    held_support: float | None = None
    verdict: ClaimVerdict | None = None

    @property
    def unheld_claims(self) -> list[Claim]:
        """The claims no sentence of the documents or the question holds whole."""
        return [claim for claim in self.claims if not claim.held]

    @property
    def partly_held(self) -> bool:
        """Whether the sentence mixes held and unheld claims: its held part is cited, its unheld claims are
        marked where they stand."""
        return partly_held(self.claims)


def sentence_groups(
    sentences: Sequence[TextSpan], units: Sequence[TextSpan]
) -> list[tuple[range, list[int]]]:
    """The answer's sentences with the output units that cover them, in answer order.

    A unit inside one sentence (a token, a sentence) joins that sentence; a unit over several (the whole
    answer) joins them all into one group, as do units that overlap across them. Units over whitespace
    only, and sentences that no unit covers, are left out.

    Parameters
    ----------
    sentences : sequence of TextSpan
        The answer's sentences, in order and disjoint.
    units : sequence of TextSpan
        The result's output units, as character spans of the answer.

    Returns
    -------
    list of (range, list of int)
        Per group, the indices of its sentences (consecutive) and of its units.
    """
    covers = [
        [
            index
            for index, sentence in enumerate(sentences)
            if unit.start < sentence.end and sentence.start < unit.end
        ]
        for unit in units
    ]
    merged: list[list[int]] = []
    for first, last in sorted((cover[0], cover[-1]) for cover in covers if cover):
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return [
        (
            range(first, last + 1),
            [unit for unit, cover in enumerate(covers) if cover and first <= cover[0] <= last],
        )
        for first, last in merged
    ]


def document_shares(scores: torch.Tensor, sources: torch.Tensor, n_documents: int) -> torch.Tensor:
    """Each document's share of a unit's attribution: the score of its best span, normalised to sum to 1 over
    the documents (a document without spans: 0).

    Not its spans' scores summed: a sum grows with the document's length, so a long document of middling
    sentences outranks a short one that holds the answer (docs/benchmarks/long-contexts.md, "Sources of different lengths").
    With one span per document (`granularity="chunk"`) both are the span's share.

    Parameters
    ----------
    scores : Tensor, shape [n_spans]
        The unit's context span scores.
    sources : Tensor of int64, shape [n_spans]
        Each span's document.
    n_documents : int
        How many documents the context has.

    Returns
    -------
    Tensor, shape [n_documents]
    """
    best = scores.new_zeros(n_documents).scatter_reduce_(0, sources, scores, "amax", include_self=False)
    total = best.sum()
    return best / total if total > 0 else best


def cited_sources(
    shares: Sequence[float], reliance: float | None, rule: CitationRule = DEFAULT_RULE
) -> tuple[list[int], str | None]:
    """The documents one unit cites under `rule`, best first, and why there are none (None when there are
    some).

    `shares` holds each document's share of the unit's attribution; `reliance` the unit's context
    reliance (None: not known, never a reason to withhold).
    """
    if reliance is not None and reliance < rule.min_reliance:
        return [], "low reliance"
    best = max(shares, default=0.0)
    if best <= 0:
        return [], "no context scores"
    order = sorted(range(len(shares)), key=lambda d: (-shares[d], d))
    return [d for d in order if shares[d] >= rule.min_share * best][: rule.max_sources], None


def document_scores(result: AttributionRecord, output: int | None = None) -> torch.Tensor:
    """`[n_documents]`: each document's share of the answer's (or output unit `output`'s) attribution, as
    citations rank them: its best span's score, normalised over the documents ([`document_shares`][rcattr.grounding.citations.document_shares])."""
    sources = torch.tensor([span.source for span in result.context_spans], dtype=torch.long)
    return document_shares(result.scores(output).cpu(), sources, len(result.chunks))


def sentence_citations(result: AttributionRecord, rule: CitationRule = DEFAULT_RULE) -> list[Citation]:
    """One citation per answer sentence (per group of [`sentence_groups`][rcattr.grounding.citations.sentence_groups]) under `rule`, with a warning
    at its caller's caller for one over several ([`RCAttributionResult.citations`][rcattr.attribution.result.RCAttributionResult.citations]).
    """
    assert result.token_attr is not None  # always set by AttributionRecord.__init__
    rows = result.sentence_rows or SentenceRows(
        result.output_spans, result.token_attr, result.unit_context_reliance
    )
    answer_sentences = sentence_spans(result.answer)
    sources_of = torch.tensor([span.source for span in result.context_spans], dtype=torch.long)
    context = context_parts(result.evidence if result.evidence is not None else result.chunks)
    citations = []
    for covered, units in sentence_groups(answer_sentences, rows.spans):
        scores = rows.scores[units].mean(0)  # [n_spans]
        reliance = None if rows.context_reliance is None else float(rows.context_reliance[units].mean())
        shares = document_shares(scores.cpu(), sources_of, len(result.chunks)).tolist()
        start, end = answer_sentences[covered[0]].start, answer_sentences[covered[-1]].end
        claims, support, held_support = sentence_vouching(result, start, end, context)
        status, verdict = None, None
        if held_support is not None and support is not None:
            unsupervised = sentence_status(held_support, claims)
            verdict, status = sentence_verdict(
                result, start, end, claims, support, held_support, unsupervised, rule.verdict
            )
        cited, uncited = cited_sources(shares, reliance, rule)
        if held_support is not None and held_support < rule.min_support and status != "supported":
            cited, uncited = [], "unsupported"
        found = [
            source(result.documents[d], d, shares[d], _best_spans(result, scores, d, rule.sentences))
            for d in cited
        ]
        citations.append(
            Citation(
                start,
                end,
                result.answer[start:end],
                found,
                reliance,
                uncited,
                len(covered),
                support,
                status,
                claims,
                held_support,
                verdict,
            )
        )
    merged = [citation.n_sentences for citation in citations if citation.n_sentences > 1]
    if merged:
        warnings.warn(
            f"{merged[0]} sentences of the answer are cited together, after the last: one output unit of the "
            "result spans them and its scores cannot be split; attribute with output_granularity='answer', "
            "'sentence' or 'token' for a citation per sentence",
            stacklevel=3,  # the caller of citations() or cited_answer()
        )
    return citations


def _best_spans(result: AttributionRecord, scores: torch.Tensor, document: int, k: int) -> list[CitedSpan]:
    """The `k` context spans of `document` with the highest `[n_spans]` scores (ties in span order)."""
    order = torch.argsort(scores, descending=True, stable=True).tolist()
    ranked = [i for i in order if result.context_spans[i].source == document][:k]
    return [
        CitedSpan(span.start, span.end, span.text, float(scores[i]))
        for i in ranked
        for span in [result.context_spans[i]]
    ]


def source(document: Document, index: int, score: float, spans: list[CitedSpan]) -> CitedSource:
    """The [`CitedSource`][rcattr.grounding.citations.CitedSource] of document `index`."""
    return CitedSource(index + 1, score, document.id, document.metadata, spans)
