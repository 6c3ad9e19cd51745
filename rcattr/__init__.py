"""rcattr: attribution and KV-cache compression from raw attention-logit statistics (RCStat)."""

from rcattr.capture import CaptureStep, LogitCapture, LogitStore
from rcattr.models import load_model
from rcattr.stats import expected_rc, overlap_bounds, phi, probability_of_superiority

__version__ = "0.1.0"

__all__ = [
    "CaptureStep",
    "LogitCapture",
    "LogitStore",
    "expected_rc",
    "load_model",
    "overlap_bounds",
    "phi",
    "probability_of_superiority",
]
