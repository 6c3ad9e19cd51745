"""Hand-made attribution results for the views' tests: two chunks with an HTML trap, and one span per document."""

from __future__ import annotations

import re

import torch

from rcattr.result import HeadSelection, RCAttributionResult
from rcattr.segmentation import TextSpan, whole_span

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
    return RCAttributionResult(
        seq_attr=token_attr.mean(0),
        token_attr=token_attr,
        context_spans=context_spans,
        output_spans=[text_span(ANSWER, "It is 330 metres tall."), text_span(ANSWER, "It opened in 1889.")],
        chunks=chunks,
        answer=ANSWER,
        answer_tokens=answer_tokens,
        groundedness=torch.linspace(0.1, 0.9, len(answer_tokens)),
        token_support=torch.linspace(0.0, 1.0, len(answer_tokens)),
        head_selection=HeadSelection(scores, torch.tensor([[0, 1], [3, 2]]), "superiority"),
        span_scorer="rc_expectation",
    )


def documents_result(shares: list[float]) -> RCAttributionResult:
    """One span per document, a one-sentence answer's scores ``shares``."""
    chunks = [f"Document text number {i}." for i in range(len(shares))]
    spans = [whole_span(chunk, index) for index, chunk in enumerate(chunks)]
    seq, answer = torch.tensor(shares), "It is 330 metres tall."
    return RCAttributionResult(
        seq_attr=seq,
        token_attr=seq[None],
        context_spans=spans,
        output_spans=[whole_span(answer)],
        chunks=chunks,
        answer=answer,
        answer_tokens=[whole_span(answer)],
        span_scorer="rc",
    )


def units_result(unit_shares: list[list[float]]) -> RCAttributionResult:
    """One span per document and one output unit per row of ``unit_shares`` (each row: the unit's scores)."""
    n_docs = len(unit_shares[0])
    chunks = [f"Document text number {i}." for i in range(n_docs)]
    units = [f"Sentence {u}." for u in range(len(unit_shares))]
    answer = " ".join(units)
    token_attr = torch.tensor(unit_shares)
    return RCAttributionResult(
        seq_attr=token_attr.mean(0),
        token_attr=token_attr,
        context_spans=[whole_span(chunk, index) for index, chunk in enumerate(chunks)],
        output_spans=[text_span(answer, unit) for unit in units],
        chunks=chunks,
        answer=answer,
        answer_tokens=[text_span(answer, unit) for unit in units],
        span_scorer="rc",
    )
