"""A compact HTML table of a result, for notebooks (``RCAttributionResult._repr_html_``)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from rcattr.text.segmentation import one_line

if TYPE_CHECKING:
    from rcattr.attribution.result import RCAttributionResult


def result_table_html(result: RCAttributionResult, top: int = 3) -> str:
    """A compact HTML table of ``result`` for notebooks (``_repr_html_``): the answer, then each output
    unit with its ``top`` sources, their scores and documents. All text is escaped."""
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
