"""A result as plain JSON values (`RCAttributionResult.to_dict`), for a service's response or a file."""

from __future__ import annotations

from typing import Any

from rcattr.grounding.vouching import unsupported_tokens
from rcattr.record.record import AttributionRecord
from rcattr.text.documents import documents_json


def result_dict(result: AttributionRecord) -> dict[str, Any]:
    """Everything in `result` as plain JSON-serialisable values (`json.dumps(result.to_dict())`).

    Spans are `{"text", "start", "end"}` dicts (context spans add `document`, counted from 1 as the marks
    `[n]` count it, and `source`, the same counted from 0: deprecated, it goes in rcattr 0.3.0); `seq_attr` is a list, `token_attr` a list of rows; the per-token signals (`groundedness`,
    `lookback`, `token_logprob`, `token_peak`, `token_support`), `context_reliance`,
    `unit_context_reliance` and `heads` (`{"kind", "selected": [[layer, head], ...], "weights", "outliers",
    "few_heads", "lexical_share", "seeing", "reach"}`: see [`HeadSelection`][rcattr.heads.selection.HeadSelection]) are
    None for baselines, `unsupported_tokens` empty. `documents` lists each document's `{"document", "id",
    "metadata"}`, the metadata made plain JSON by [`plain_json`][rcattr.text.documents.plain_json] (dates as ISO
    strings, bytes decoded, other objects as their `str()`). The full `[L, H]` head score table is left out
    (see [`head_selection`][rcattr.record.signals.RCSignals]).
    """
    assert result.token_attr is not None  # always set by AttributionRecord.__init__
    selection = result.head_selection
    return {
        "answer": result.answer,
        "chunks": result.chunks,
        "documents": documents_json(result.documents),
        "span_scorer": result.span_scorer,
        "context_spans": [
            {"text": s.text, "document": s.source + 1, "source": s.source, "start": s.start, "end": s.end}
            for s in result.context_spans
        ],
        "output_spans": [{"text": s.text, "start": s.start, "end": s.end} for s in result.output_spans],
        "seq_attr": result.seq_attr.tolist(),
        "token_attr": result.token_attr.tolist(),
        "answer_tokens": [{"text": s.text, "start": s.start, "end": s.end} for s in result.answer_tokens],
        **{
            name: None if values is None else values.tolist()
            for name, values in (
                ("groundedness", result.groundedness),
                ("lookback", result.lookback),
                ("token_logprob", result.token_logprob),
                ("token_peak", result.token_peak),
                ("token_support", result.token_support),
            )
        },
        "context_reliance": result.context_reliance,
        "unit_context_reliance": None
        if result.unit_context_reliance is None
        else result.unit_context_reliance.tolist(),
        "unsupported_tokens": unsupported_tokens(result),
        "heads": None
        if selection is None
        else {
            "kind": selection.kind,
            "selected": [list(pair) for pair in selection.as_pairs()],
            "weights": None if selection.weights is None else selection.weights.tolist(),
            "outliers": selection.outliers,
            "few_heads": selection.few_heads,
            "lexical_share": result.lexical_share,
            "seeing": selection.seeing,
            "reach": None if selection.reach is None else selection.reach.tolist(),
        },
    }
