"""What the views of a result share: cutting a chunk into its spans and the gaps between them, and a
span's shading intensity (absolute in the terminal, against the best span on the HTML page)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from rcattr.text.documents import source_labels
from rcattr.text.segmentation import TextSpan

if TYPE_CHECKING:
    from rcattr.record.record import AttributionRecord

Piece = tuple[int, int, int | None]  # (start, end, index): characters and their span (None in a gap)


def text_pieces(spans: Sequence[tuple[int, TextSpan]], start: int, end: int) -> list[Piece]:
    """Cut `[start, end)` into the `(index, span)` spans, in text order, and the gaps between them.

    Spans are clipped to the range and to the end of the previous span, so touching or overlapping
    spans still give each character exactly once.
    """
    pieces: list[Piece] = []
    cursor = start
    for index, span in sorted(spans, key=lambda item: (item[1].start, item[1].end)):
        low, high = max(span.start, cursor), min(span.end, end)
        if low >= high:
            continue
        if low > cursor:
            pieces.append((cursor, low, None))
        pieces.append((low, high, index))
        cursor = high
    if cursor < end:
        pieces.append((cursor, end, None))
    return pieces


def chunk_pieces(result: AttributionRecord, source: int) -> list[Piece]:
    spans = [(i, span) for i, span in enumerate(result.context_spans) if span.source == source]
    return text_pieces(spans, 0, len(result.chunks[source]))


def document_names(result: AttributionRecord) -> list[str]:
    """`[n_documents]` headings: `Document [n]` (`Context` for a lone string), with the document's title,
    source or id when it has one, told apart from the documents that share it ([`source_labels`][rcattr.text.documents.source_labels])."""
    several = len(result.chunks) > 1
    labels = source_labels(result.documents)
    return [
        (f"Document [{source + 1}]" if several else "Context")
        + (f": {label}" if document.metadata or document.id else "")
        for source, (document, label) in enumerate(zip(result.documents, labels, strict=True))
    ]


def shade_intensity(scores: torch.Tensor) -> list[float]:
    """`[n_spans]` shading intensities in [0, 1]: the square root of each span's share of the answer.

    Absolute, not relative to the best span, so a context that explains nothing stays pale; the square
    root keeps shares of a few percent visible (0.01 -> 0.1, 0.25 -> 0.5, 1 -> 1).
    """
    return scores.detach().float().cpu().clamp(0, 1).sqrt().tolist()


def contrast_intensity(scores: torch.Tensor) -> torch.Tensor:
    """`[..., n_spans]` shading intensities in [0, 1], each row's relative to its own best span: how far a
    span's score stands above the row's mean (an even spread), as a fraction of how far the best one does.

    The best span gets 1 and a span at or below an even share gets 0, so the few spans an answer draws on
    stand out from many near-even ones; a row where no span stands above the rest (a flat context) stays
    unshaded. Equivalently: the score relative to the best, `s / best`, rescaled from a floor at
    `mean / best` (below it nothing is shaded) up to 1.
    """
    scores = scores.detach().float().cpu()
    if scores.shape[-1] == 0:
        return scores
    mean = scores.mean(-1, keepdim=True)
    best = scores.amax(-1, keepdim=True)
    lead = best - mean
    flat = lead <= 1e-6 * best.abs().clamp_min(1e-6)  # float error, not a span standing out
    return torch.where(flat, 0.0, (scores - mean) / lead.clamp_min(1e-12)).clamp(0, 1)
