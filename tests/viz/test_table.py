"""A result as tables (rcattr.viz.table): the DataFrame, whose deprecated 0-based `source` warns only when read, and
the notebook table of each unit's top sources, escaped."""

from __future__ import annotations

import pickle
import re
import warnings

import pandas as pd
import pytest

from rcattr.viz.table import result_frame, result_table_html
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


def test_the_frame_numbers_documents_from_one_and_only_reading_source_warns() -> None:
    result = hand_made_result()
    frame = result_frame(result)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # printing, deriving, querying and pickling read no deprecated column
        frame.to_string(), frame.sort_values("score")["text"], frame.query("score > 0")
        restored = pickle.loads(pickle.dumps(frame))
    assert type(restored) is pd.DataFrame and restored.equals(frame) and restored.attrs == frame.attrs
    assert sorted(frame["document"]) == sorted(span.source + 1 for span in result.context_spans)
    with pytest.warns(DeprecationWarning, match="`source` column .* goes in rcattr 0.3.0"):
        assert (frame["source"] == frame["document"] - 1).all()
    with pytest.warns(DeprecationWarning):
        frame.source  # noqa: B018
