"""Hand-made attribution results for the views' tests: two chunks with an HTML trap, and one span per document."""

from __future__ import annotations

import re

import torch

from rcattr.attribution.result import RCAttributionResult
from rcattr.heads.selection import HeadSelection
from rcattr.record.attributed import AttributedAnswer, AttributedContext
from rcattr.record.signals import RCSignals
from rcattr.text.segmentation import TextSpan, whole_span

CHUNKS = [
    "The Eiffel Tower is 330 metres tall. It was completed in 1889.",
    'Beware <script>alert("x")</script> & friends. Mount Fuji is 3,776 metres high.',
]
ANSWER = "It is 330 metres tall. It opened in 1889."


def text_span(text: str, piece: str, source: int = 0) -> TextSpan:
    """The span of ``piece``'s first occurrence in ``text`` (of chunk ``source``)."""
    start = text.index(piece)
    return TextSpan(start, start + len(piece), piece, source)


def hand_made_result(
    context_spans: list[TextSpan] | None = None, chunks: list[str] | None = None
) -> RCAttributionResult:
    """Two answer sentences over ``context_spans`` of ``chunks`` (four sentences of :data:`CHUNKS`), with
    groundedness, token support and a head selection."""
    chunks = CHUNKS if chunks is None else chunks
    if context_spans is None:  # listed out of text order on purpose; the gap " " is no span
        context_spans = [
            text_span(chunks[0], "It was completed in 1889."),
            text_span(chunks[0], "The Eiffel Tower is 330 metres tall."),
            text_span(chunks[1], 'Beware <script>alert("x")</script> & friends.', 1),
            text_span(chunks[1], "Mount Fuji is 3,776 metres high.", 1),
        ]
    n = len(context_spans)
    token_attr = torch.softmax(torch.arange(2 * n, dtype=torch.float).view(2, n).flip(1) * 0.7, dim=1)
    token_attr[1] = token_attr[1].roll(1)
    answer_tokens = [TextSpan(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", ANSWER)]
    generator = torch.Generator().manual_seed(0)
    scores = torch.rand(4, 3, generator=generator)
    n = len(answer_tokens)
    units = [text_span(ANSWER, "It is 330 metres tall."), text_span(ANSWER, "It opened in 1889.")]
    return RCAttributionResult(
        token_attr.mean(0),
        token_attr,
        context=AttributedContext.of_texts(chunks, context_spans),
        output=AttributedAnswer(ANSWER, units, answer_tokens),
        span_scorer="rc_expectation",
        rc=rc_signals(
            n,
            len(units),
            support=torch.linspace(0.0, 1.0, n).tolist(),
            groundedness=torch.linspace(0.1, 0.9, n).tolist(),
            selection=HeadSelection(scores, torch.tensor([[0, 1], [3, 2]]), "superiority"),
        ),
    )


def documents_result(shares: list[float]) -> RCAttributionResult:
    """One span per document, a one-sentence answer's scores ``shares``."""
    chunks = [f"Document text number {i}." for i in range(len(shares))]
    spans = [whole_span(chunk, index) for index, chunk in enumerate(chunks)]
    seq, answer = torch.tensor(shares), "It is 330 metres tall."
    return RCAttributionResult(
        seq,
        seq[None],
        context=AttributedContext.of_texts(chunks, spans),
        output=AttributedAnswer(answer, [whole_span(answer)], [whole_span(answer)]),
        span_scorer="rc",
    )


def units_result(unit_shares: list[list[float]]) -> RCAttributionResult:
    """One span per document and one output unit per row of ``unit_shares`` (each row: the unit's scores)."""
    n_docs = len(unit_shares[0])
    chunks = [f"Document text number {i}." for i in range(n_docs)]
    units = [f"Sentence {u}." for u in range(len(unit_shares))]
    answer = " ".join(units)
    token_attr = torch.tensor(unit_shares)
    spans = [text_span(answer, unit) for unit in units]
    return RCAttributionResult(
        token_attr.mean(0),
        token_attr,
        context=AttributedContext.of_texts(
            chunks, [whole_span(chunk, index) for index, chunk in enumerate(chunks)]
        ),
        output=AttributedAnswer(answer, spans, spans),
        span_scorer="rc",
    )


def rc_signals(
    n_tokens: int,
    n_units: int,
    *,
    support: list[float] | None = None,
    reliance: list[float] | None = None,
    groundedness: list[float] | None = None,
    selection: HeadSelection | None = None,
) -> RCSignals:
    """RC signals for an answer of ``n_tokens`` tokens and ``n_units`` output units: the values given, else full
    support, reliance and groundedness (1), log-probability 0 and one selected head of a 2 x 2 model."""
    ones = torch.ones(n_tokens)
    return RCSignals(
        groundedness=ones if groundedness is None else torch.tensor(groundedness),
        lookback=ones,
        unit_context_reliance=torch.ones(n_units) if reliance is None else torch.tensor(reliance),
        token_logprob=torch.zeros(n_tokens),
        token_peak=ones,
        token_support=ones if support is None else torch.tensor(support),
        head_selection=HeadSelection(torch.eye(2), torch.tensor([[0, 0]]), "superiority")
        if selection is None
        else selection,
    )
