"""What an attribution found, as data, below everything that reads it: the record (record: `AttributionRecord`, a
captum `LLMAttributionResult` with the spans), the context and answer its scores refer to (attributed) and what
only RC knows of the answer (signals: `RCSignals`). Grounding, views and the result read a record; nothing here
reads them."""

from rcattr.record.attributed import AttributedAnswer, AttributedContext, SentenceRows
from rcattr.record.record import AttributionRecord
from rcattr.record.signals import RCSignals

__all__ = ["AttributedAnswer", "AttributedContext", "AttributionRecord", "RCSignals", "SentenceRows"]
