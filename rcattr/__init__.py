"""rcattr: attribution and KV-cache compression from raw attention-logit statistics (RCStat).

The public names are imported on first use, so ``import rcattr`` (and ``rcattr --help``) does not pay
for torch, transformers and captum until something needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr.lazy import lazy_exports

__version__ = "0.1.0"


if TYPE_CHECKING:
    from rcattr.attributor import RCAttributor
    from rcattr.capture import CaptureStep, LogitCapture, LogitStore
    from rcattr.citations import Citation, CitedSource, CitedSpan, SentenceRows
    from rcattr.documents import Document
    from rcattr.head_selection import HeadSelection
    from rcattr.models import load_model
    from rcattr.prompting import ContextInput
    from rcattr.result import RCAttributionResult
    from rcattr.scorers import AttentionScorer, SpanScorer
    from rcattr.segmentation import TextSpan
    from rcattr.selectors import FixedHeads, HeadSelector, OutlierHeads, TopHeads
    from rcattr.signals import RCSignals
    from rcattr.stats import expected_rc, overlap_bounds, phi, probability_of_superiority


__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".attributor": ["RCAttributor"],
        ".capture": ["CaptureStep", "LogitCapture", "LogitStore"],
        ".citations": ["Citation", "CitedSource", "CitedSpan", "SentenceRows"],
        ".documents": ["Document"],
        ".models": ["load_model"],
        ".prompting": ["ContextInput"],
        ".head_selection": ["HeadSelection"],
        ".result": ["RCAttributionResult"],
        ".signals": ["RCSignals"],
        ".segmentation": ["TextSpan"],
        ".scorers": ["AttentionScorer", "SpanScorer"],
        ".selectors": ["FixedHeads", "HeadSelector", "OutlierHeads", "TopHeads"],
        ".stats": ["expected_rc", "overlap_bounds", "phi", "probability_of_superiority"],
    },
)
