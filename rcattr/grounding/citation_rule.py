"""The citation rule: which documents an answer sentence cites, and how the cited answer shows them. One frozen
object, read by the result's `citations` and `cited_answer`, the command line and the service's schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rcattr.grounding.probe import DEFAULT_OPERATING_POINT, OPERATING_POINTS
from rcattr.grounding.vouching import UNSUPPORTED_BELOW

__all__ = ["CITATION_STYLES", "DEFAULT_RULE", "CitationRule", "CitationStyle"]

CitationStyle = Literal["[n]", "markdown", "html"]
CITATION_STYLES: tuple[CitationStyle, ...] = ("[n]", "markdown", "html")


@dataclass(frozen=True)
class CitationRule:
    """Which documents each answer sentence cites ([`sentence_citations`][rcattr.grounding.citations.sentence_citations]) and
    how the cited answer marks them ([`cited_answer`][rcattr.viz.cited_answer.cited_answer]).

    The defaults were chosen on the dev part of QuoteSum and Veri-Gran (docs/benchmarks/citations.md, "Citations"): the
    rule with the best mean F1 of the cited documents over both files, 91.5% and 90.0% there, 87.7% and 86.1% on
    the held-back part. Withholding by context reliance lowered F1 on both files' answers (by 0.9 and 2.9
    points), so it is off.

    Parameters
    ----------
    min_share : float in (0, 1], default 0.8
        A document is cited when its share of the sentence's attribution is at least this fraction of the best
        document's.
    max_sources : int >= 1, default 3
        At most this many documents per sentence, best first.
    min_reliance : float in [0, 1], default 0
        A sentence whose context reliance is below this gets no citation.
    sentences : int >= 0, default 0
        Also give each cited document's `sentences` best context spans for the sentence.
    min_support : float in [0, 1]
        A sentence whose support (how much the documents vouch for it) is below this gets no citation; the
        default is the cut-off of the `"unsupported"` status, 0 cites every sentence whatever its support.
    style : {"[n]", "markdown", "html"}, default "[n]"
        The cited answer's marks: plain `[1]`, markdown footnotes, or linked HTML superscripts.
    references : bool, default True
        The cited answer ends with the list of the cited documents.
    verdict : str, default "balanced"
        The support probe's operating point, where a probe fits the model (`rcattr.grounding.verdict`):
        `"lenient"`, `"balanced"` or `"strict"`, the cut that marks at most 10%, 20% or 35% of the attributable claims of AttributionBench dev, out of fold.
    """

    min_share: float = 0.8
    max_sources: int = 3
    min_reliance: float = 0.0
    sentences: int = 0
    min_support: float = UNSUPPORTED_BELOW
    style: CitationStyle = "[n]"
    references: bool = True
    verdict: str = DEFAULT_OPERATING_POINT

    def __post_init__(self) -> None:
        if self.verdict not in OPERATING_POINTS:
            raise ValueError(f"unknown verdict {self.verdict!r}; choose one of {list(OPERATING_POINTS)}")
        if not 0 <= self.min_support <= 1:
            raise ValueError(
                f"min_support must be in [0, 1] (support is a probability), got {self.min_support!r}"
            )
        if not 0 < self.min_share <= 1:
            raise ValueError(
                f"min_share must be in (0, 1] (a share of the best document's), got {self.min_share!r}"
            )
        if (
            isinstance(self.max_sources, bool)
            or not isinstance(self.max_sources, int)
            or self.max_sources < 1
        ):
            raise ValueError(f"max_sources must be a whole number >= 1, got {self.max_sources!r}")
        if not 0 <= self.min_reliance <= 1:
            raise ValueError(
                f"min_reliance must be in [0, 1] (context reliance is a ratio), got {self.min_reliance!r}"
            )
        if isinstance(self.sentences, bool) or not isinstance(self.sentences, int) or self.sentences < 0:
            raise ValueError(f"sentences must be a whole number >= 0, got {self.sentences!r}")
        if self.style not in CITATION_STYLES:
            raise ValueError(f"unknown citation style {self.style!r}; choose one of {list(CITATION_STYLES)}")


DEFAULT_RULE = CitationRule()
"""The rule `result.citations()` and `result.cited_answer()` follow when given none."""
