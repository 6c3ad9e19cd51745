"""Citations: which documents (and sentences) support each part of an answer, as an application shows them.

:meth:`RCAttributionResult.citations <rcattr.result.RCAttributionResult.citations>` turns a result's scores
into one :class:`Citation` per output unit (per answer sentence with ``output_granularity="sentence"``).
:func:`cited_sources` is the rule: a unit cites the documents whose share of its attribution is at least
``min_share`` of its best document's, at most ``max_sources`` of them, and none when its context reliance
(the lookback ratio on the selected heads) is below ``min_reliance``. The defaults were chosen on part of
QuoteSum and Veri-Gran and checked on the part held back (``python -m rcattr.eval.citations``,
docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rcattr.documents import Document

# Chosen on the dev part of QuoteSum and Veri-Gran (docs/benchmarks.md, "Citations"): the rule with the best
# mean F1 of the cited documents over both files, 91.5% and 90.0% there, 87.7% and 86.1% on the held-back part.
# Withholding by any signal lowered F1 on both files' answers (reliance by 0.9 and 2.9 points), so it is off.
MIN_SHARE = 0.8
MAX_SOURCES = 3
MIN_RELIANCE = 0.0


@dataclass(frozen=True)
class CitedSpan:
    """A context span (a sentence, with ``granularity="sentence"``) of a cited document.

    ``start`` and ``end`` are character offsets into the document's text; ``score`` is the span's share of
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
    document : int
        0-based index of the document in the context (``result.documents``).
    number : int
        The mark's number: ``document + 1``, as the prompt numbers it (``Document [n]``).
    score : float
        The document's share of the unit's attribution (its spans' scores summed).
    id, metadata
        The document's own, as the input gave them.
    spans : list of CitedSpan
        The document's best spans for the unit, when asked for (``sentences=``).
    """

    document: int
    number: int
    score: float
    id: str | None
    metadata: Mapping[str, Any]
    spans: list[CitedSpan] = field(default_factory=list)


@dataclass(frozen=True)
class Citation:
    """The sources of one output unit.

    Attributes
    ----------
    start, end : int
        Character offsets of the unit in the answer.
    text : str
        ``answer[start:end]``.
    sources : list of CitedSource
        The cited documents, best first; empty when the unit gets no citation.
    context_reliance : float or None
        The unit's context reliance (None for baselines), which the rule compares with ``min_reliance``.
    uncited : str or None
        Why the unit has no citation: ``"low reliance"`` or ``"no context scores"``; None when it has one.
    """

    start: int
    end: int
    text: str
    sources: list[CitedSource]
    context_reliance: float | None
    uncited: str | None = None


def cited_sources(
    shares: Sequence[float],
    reliance: float | None,
    *,
    min_share: float = MIN_SHARE,
    max_sources: int = MAX_SOURCES,
    min_reliance: float = MIN_RELIANCE,
) -> tuple[list[int], str | None]:
    """The documents one unit cites, best first, and why there are none (None when there are some).

    ``shares`` holds each document's share of the unit's attribution; ``reliance`` the unit's context
    reliance (None: not known, never a reason to withhold).
    """
    check_rule(min_share, max_sources, min_reliance)
    if reliance is not None and reliance < min_reliance:
        return [], "low reliance"
    best = max(shares, default=0.0)
    if best <= 0:
        return [], "no context scores"
    order = sorted(range(len(shares)), key=lambda d: (-shares[d], d))
    return [d for d in order if shares[d] >= min_share * best][:max_sources], None


def check_rule(min_share: float, max_sources: int, min_reliance: float) -> None:
    """Refuse a rule outside its range, naming the argument."""
    if not 0 < min_share <= 1:
        raise ValueError(f"min_share must be in (0, 1] (a share of the best document's), got {min_share!r}")
    if isinstance(max_sources, bool) or not isinstance(max_sources, int) or max_sources < 1:
        raise ValueError(f"max_sources must be a whole number >= 1, got {max_sources!r}")
    if not 0 <= min_reliance <= 1:
        raise ValueError(
            f"min_reliance must be in [0, 1] (context reliance is a ratio), got {min_reliance!r}"
        )


def source(document: Document, index: int, score: float, spans: list[CitedSpan]) -> CitedSource:
    """The :class:`CitedSource` of document ``index``."""
    return CitedSource(index, index + 1, score, document.id, document.metadata, spans)
