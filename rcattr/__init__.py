"""rcattr: attribution and KV-cache compression from raw attention-logit statistics (RCStat).

The public names are imported on first use, so ``import rcattr`` (and ``rcattr --help``) does not pay
for torch, transformers and captum until something needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr._lazy import lazy_exports

__version__ = "0.1.0"


if TYPE_CHECKING:
    from rcattr.attributor import RCAttributor
    from rcattr.capture import CaptureStep, LogitCapture, LogitStore
    from rcattr.citations import Citation, CitedSource, CitedSpan, SentenceRows
    from rcattr.documents import Document
    from rcattr.models import load_model
    from rcattr.prompting import ContextInput
    from rcattr.result import HeadSelection, RCAttributionResult
    from rcattr.segmentation import TextSpan
    from rcattr.selectors import BottomHeads, FixedHeads, OutlierHeads, TopHeads
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
        ".result": ["HeadSelection", "RCAttributionResult"],
        ".segmentation": ["TextSpan"],
        ".selectors": ["BottomHeads", "FixedHeads", "OutlierHeads", "TopHeads"],
        ".stats": ["expected_rc", "overlap_bounds", "phi", "probability_of_superiority"],
    },
)
