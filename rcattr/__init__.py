"""rcattr: attribution and KV-cache compression from raw attention-logit statistics (RCStat)."""

from rcattr.attributor import RCAttributor
from rcattr.capture import CaptureStep, LogitCapture, LogitStore
from rcattr.models import load_model
from rcattr.prompting import ContextInput
from rcattr.result import HeadSelection, RCAttributionResult
from rcattr.segmentation import TextSpan
from rcattr.stats import expected_rc, overlap_bounds, phi, probability_of_superiority

__version__ = "0.1.0"

__all__ = [
    "CaptureStep",
    "ContextInput",
    "HeadSelection",
    "RCAttributionResult",
    "RCAttributor",
    "TextSpan",
    "LogitCapture",
    "LogitStore",
    "expected_rc",
    "load_model",
    "overlap_bounds",
    "phi",
    "probability_of_superiority",
]
