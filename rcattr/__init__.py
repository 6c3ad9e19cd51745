"""rcattr: attribution and KV-cache compression from raw attention-logit statistics (RCStat).

The public names are imported on first use, so `import rcattr` (and `rcattr --help`) does not pay
for torch, transformers and captum until something needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr import moved
from rcattr.lazy import lazy_exports
from rcattr.version import __version__ as __version__

moved.install()  # the module paths that moved in 0.2.0 import, with a DeprecationWarning, until 0.3.0


if TYPE_CHECKING:
    from rcattr.attribution.attributor import RCAttributor
    from rcattr.attribution.claim_checks import claim_verdict
    from rcattr.attribution.result import RCAttributionResult
    from rcattr.attribution.scorers import AttentionScorer, SpanScorer
    from rcattr.grounding.citation_rule import CitationRule
    from rcattr.grounding.citations import Citation, CitedSource, CitedSpan
    from rcattr.grounding.probe import SupportProbe
    from rcattr.grounding.verdict import ClaimVerdict
    from rcattr.heads.selection import HeadSelection
    from rcattr.heads.selectors import FixedHeads, HeadSelector, OutlierHeads, TopHeads
    from rcattr.record.attributed import SentenceRows
    from rcattr.record.signals import RCSignals
    from rcattr.runtime.capture import CaptureStep, LogitCapture, LogitStore
    from rcattr.runtime.models import load_model
    from rcattr.stats import expected_rc, overlap_bounds, phi, probability_of_superiority
    from rcattr.text.documents import Document
    from rcattr.text.prompting import ContextInput
    from rcattr.text.segmentation import TextSpan


__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".attribution.attributor": ["RCAttributor"],
        ".runtime.capture": ["CaptureStep", "LogitCapture", "LogitStore"],
        ".record.attributed": ["SentenceRows"],
        ".grounding.citation_rule": ["CitationRule"],
        ".grounding.citations": ["Citation", "CitedSource", "CitedSpan"],
        ".text.documents": ["Document"],
        ".runtime.models": ["load_model"],
        ".text.prompting": ["ContextInput"],
        ".heads.selection": ["HeadSelection"],
        ".attribution.result": ["RCAttributionResult"],
        ".record.signals": ["RCSignals"],
        ".grounding.probe": ["SupportProbe"],
        ".grounding.verdict": ["ClaimVerdict"],
        ".attribution.claim_checks": ["claim_verdict"],
        ".text.segmentation": ["TextSpan"],
        ".attribution.scorers": ["AttentionScorer", "SpanScorer"],
        ".heads.selectors": ["FixedHeads", "HeadSelector", "OutlierHeads", "TopHeads"],
        ".stats": ["expected_rc", "overlap_bounds", "phi", "probability_of_superiority"],
    },
)
