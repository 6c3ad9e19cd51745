"""The notebook table of a result (rcattr.viz.table): each unit's top sources, escaped."""

from __future__ import annotations

import re

from rcattr.viz.table import result_table_html
from tests.helpers.results import hand_made_result


def test_the_table_lists_each_units_top_sources_with_their_scores() -> None:
    result = hand_made_result()
    page = result_table_html(result, top=2)
    assert page.count("<tr>") == 1 + 2 * len(result.output_spans)  # the header, then top rows per unit
    assert page.count('rowspan="2"') == len(result.output_spans)
    expected = [f"{score:.1%}" for unit in range(2) for _, score in result.top(2, output=unit)]
    assert re.findall(r"<td>([\d.]+%)</td>", page) == expected
    assert "[1] It was completed in 1889." in page  # several documents: each source names its own


def test_the_table_escapes_the_documents_text() -> None:
    page = result_table_html(hand_made_result(), top=4)
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; friends." in page
