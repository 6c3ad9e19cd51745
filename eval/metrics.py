"""Attribution accuracy against gold (answer span -> source) labels.

The paper's Table 1 metric is chunk-level: an answer span is attributed correctly when the context
span with the highest score belongs to the span's gold source. With sentence or token context
spans the same rule scores the source of the top sentence or token, and, where the gold text is a
verbatim quote of its source (about 92% of QuoteSum spans), :func:`location_hits` also checks that
the top span overlaps the quoted location. Ties go to the lowest span index (``torch.argmax``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rcattr.eval.datasets import AttributionRecord, GoldSpan
from rcattr.segmentation import TextSpan


def top_spans(scores: torch.Tensor) -> list[int]:
    """Index of the highest-scoring context span per output unit; ``scores [n_outputs, n_spans]``."""
    return torch.argmax(scores.float(), dim=-1).tolist()


def source_hits(
    scores: torch.Tensor, context_spans: Sequence[TextSpan], gold: Sequence[GoldSpan]
) -> list[bool]:
    """Per gold span (one output unit each): is the top context span in the gold source?"""
    if scores.shape[0] != len(gold):
        raise ValueError(f"{scores.shape[0]} output units for {len(gold)} gold spans")
    return [
        context_spans[top].source == span.source for top, span in zip(top_spans(scores), gold, strict=True)
    ]


def quote_location(span: GoldSpan, chunks: Sequence[str]) -> tuple[int, int] | None:
    """``(start, end)`` of the gold text in its source chunk, or None when it is not a verbatim quote."""
    start = chunks[span.source].find(span.text)
    return None if start < 0 else (start, start + len(span.text))


def location_hits(
    scores: torch.Tensor, context_spans: Sequence[TextSpan], record: AttributionRecord
) -> list[bool | None]:
    """Per gold span: does the top context span overlap the quoted text? None where it is not a quote."""
    hits: list[bool | None] = []
    for top, span in zip(top_spans(scores), record.gold, strict=True):
        location = quote_location(span, record.chunks)
        if location is None:
            hits.append(None)
            continue
        best = context_spans[top]
        hits.append(best.source == span.source and best.start < location[1] and location[0] < best.end)
    return hits


def accuracy(hits: Sequence[bool | None]) -> tuple[float, int]:
    """Fraction of true hits among the defined ones, and how many were defined (nan when none)."""
    defined = [hit for hit in hits if hit is not None]
    return (sum(defined) / len(defined) if defined else float("nan")), len(defined)
