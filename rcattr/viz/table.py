"""A result as tables: its context spans as a DataFrame (ContextCite's table, `to_dataframe`) and a compact
HTML table for notebooks (`_repr_html_`)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from rcattr.attribution.record import AttributionRecord
from rcattr.text.segmentation import one_line

if TYPE_CHECKING:
    import pandas as pd


def result_frame(result: AttributionRecord, output: int | None = None) -> pd.DataFrame:
    """Context spans sorted by score (ContextCite's table): `document` numbers documents from 1 as
    people read them (`Document [1]`), `source` is the 0-based index into `chunks`, `start` and
    `end` are character offsets into that chunk. `attrs["context_reliance"]` holds the answer's (or
    the output unit's) context reliance."""
    import pandas as pd

    columns = ["score", "document", "source", "start", "end", "text"]
    rows = [
        (score, span.source + 1, span.source, span.start, span.end, span.text)
        for span, score in result.top(None, output)
    ]
    frame = pd.DataFrame(rows, columns=columns)
    if output is None or result.unit_context_reliance is None:
        frame.attrs["context_reliance"] = result.context_reliance
    else:
        frame.attrs["context_reliance"] = float(result.unit_context_reliance[output])
    return frame


def result_table_html(result: AttributionRecord, top: int = 3) -> str:
    """A compact HTML table of `result` for notebooks (`_repr_html_`): the answer, then each output
    unit with its `top` sources, their scores and documents. All text is escaped."""
    several = len(result.chunks) > 1
    rows = []
    for unit, span in enumerate(result.output_spans):
        sources = result.top(top, output=unit)
        for rank, (source, score) in enumerate(sources):
            lead = (
                f'<td rowspan="{len(sources)}" dir="auto">{html.escape(one_line(span.text, 120))}</td>'
                if rank == 0
                else ""
            )
            where = f"[{source.source + 1}] " if several else ""
            rows.append(
                f"<tr>{lead}<td>{score:.1%}</td>"
                f'<td dir="auto">{html.escape(where + one_line(source.text, 160))}</td></tr>'
            )
    style = "border-collapse:collapse;text-align:left;vertical-align:top"
    return (
        f'<div><p dir="auto"><b>Answer</b> ({html.escape(result.span_scorer)}): {html.escape(result.answer)}</p>'
        f'<table style="{style}"><tr><th>output</th><th>score</th><th>source</th></tr>{"".join(rows)}</table></div>'
    )
