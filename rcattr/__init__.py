"""rcattr: attribution and KV-cache compression from raw attention-logit statistics (RCStat).

The public names are imported on first use, so ``import rcattr`` (and ``rcattr --help``) does not pay
for torch, transformers and captum until something needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "BottomHeads": "rcattr.selectors",
    "CaptureStep": "rcattr.capture",
    "ContextInput": "rcattr.prompting",
    "FixedHeads": "rcattr.selectors",
    "HeadSelection": "rcattr.result",
    "LogitCapture": "rcattr.capture",
    "LogitStore": "rcattr.capture",
    "OutlierHeads": "rcattr.selectors",
    "RCAttributionResult": "rcattr.result",
    "RCAttributor": "rcattr.attributor",
    "TextSpan": "rcattr.segmentation",
    "TopHeads": "rcattr.selectors",
    "expected_rc": "rcattr.stats",
    "load_model": "rcattr.models",
    "overlap_bounds": "rcattr.stats",
    "phi": "rcattr.stats",
    "probability_of_superiority": "rcattr.stats",
}

__all__ = [
    "BottomHeads",
    "CaptureStep",
    "ContextInput",
    "FixedHeads",
    "HeadSelection",
    "LogitCapture",
    "LogitStore",
    "OutlierHeads",
    "RCAttributionResult",
    "RCAttributor",
    "TextSpan",
    "TopHeads",
    "expected_rc",
    "load_model",
    "overlap_bounds",
    "phi",
    "probability_of_superiority",
]

if TYPE_CHECKING:
    from rcattr.attributor import RCAttributor
    from rcattr.capture import CaptureStep, LogitCapture, LogitStore
    from rcattr.models import load_model
    from rcattr.prompting import ContextInput
    from rcattr.result import HeadSelection, RCAttributionResult
    from rcattr.segmentation import TextSpan
    from rcattr.selectors import BottomHeads, FixedHeads, OutlierHeads, TopHeads
    from rcattr.stats import expected_rc, overlap_bounds, phi, probability_of_superiority


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
