"""A result as tables: its context spans as a DataFrame (ContextCite's table, `to_dataframe`) and a compact
HTML table for notebooks (`_repr_html_`)."""

from __future__ import annotations

import functools
import html
import warnings
from typing import TYPE_CHECKING, Any

from rcattr.record.record import AttributionRecord
from rcattr.text.segmentation import one_line

if TYPE_CHECKING:
    import pandas as pd


def result_frame(result: AttributionRecord, output: int | None = None) -> pd.DataFrame:
    """Context spans sorted by score (ContextCite's table): `document` numbers documents from 1 as people read
    them (`Document [1]`, the marks' `[1]`), `start` and `end` are character offsets into that document's
    text. `source`, the 0-based index (`document - 1`), is deprecated: reading it warns, and it goes in
    rcattr 0.3.0. `attrs["context_reliance"]` holds the answer's (or the output unit's) context reliance."""
    columns = ["score", "document", "source", "start", "end", "text"]
    rows = [
        (score, span.source + 1, span.source, span.start, span.end, span.text)
        for span, score in result.top(None, output)
    ]
    frame = _span_frame()(rows, columns=columns)
    if output is None or result.unit_context_reliance is None:
        frame.attrs["context_reliance"] = result.context_reliance
    else:
        frame.attrs["context_reliance"] = float(result.unit_context_reliance[output])
    return frame


_DEPRECATED_COLUMN = "source"


@functools.cache
def _span_frame() -> type[pd.DataFrame]:
    """`result_frame`'s DataFrame: reading its deprecated `source` column warns (pandas is imported on first use)."""
    import pandas as pd

    class SpanFrame(pd.DataFrame):
        @property
        def _constructor(self) -> type[pd.DataFrame]:
            return pd.DataFrame  # what is derived from the table is a plain frame

        def __getitem__(self, key: Any) -> Any:
            keys = key if isinstance(key, list) else [key]
            if any(isinstance(k, str) and k == _DEPRECATED_COLUMN for k in keys):
                warnings.warn(
                    "the table's `source` column (documents counted from 0) goes in rcattr 0.3.0: use `document` "
                    "(counted from 1, as the marks [n]); result.documents[document - 1] is the document",
                    DeprecationWarning,
                    stacklevel=2,
                )
            return super().__getitem__(key)

        def __reduce__(self) -> Any:
            plain = pd.DataFrame(self)  # pickled as a plain frame: this class lives in a function
            plain.attrs = dict(self.attrs)
            return plain.__reduce__()

        def query(self, expr: str, **kwargs: Any) -> Any:
            with warnings.catch_warnings():  # query resolves every column by name, read or not
                warnings.filterwarnings("ignore", "the table's `source` column", DeprecationWarning)
                return super().query(expr, **kwargs)

    return SpanFrame


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
