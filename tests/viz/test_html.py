"""The HTML page (rcattr.viz.html) of a synthetic attribution result: chunks, spans, shading, citations."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

from rcattr.attribution.result import SUPPORT_THRESHOLD
from rcattr.text.segmentation import TextSpan, whole_span
from rcattr.viz import (
    save_html,
    to_html,
    to_terminal,
)
from tests.helpers.results import CHUNKS, documents_result, hand_made_result, units_result


class _Collector(HTMLParser):
    """Text of each ``data-chunk`` block, the ``data-i`` of its spans in order, and the JSON payload."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: dict[int, str] = {}
        self.span_order: dict[int, list[int]] = {}
        self.payload = ""
        self._chunk: int | None = None
        self._depth = 0
        self._in_json = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if self._chunk is not None:
            self._depth += 1
            if "data-i" in found:
                self.span_order[self._chunk].append(int(found["data-i"] or -1))
        elif "data-chunk" in found:
            self._chunk, self._depth = int(found["data-chunk"] or -1), 0
            self.chunks[self._chunk], self.span_order[self._chunk] = "", []
        self._in_json = found.get("type") == "application/json"

    def handle_endtag(self, tag: str) -> None:
        self._in_json = False
        if self._chunk is not None:
            if self._depth == 0:
                self._chunk = None
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._chunk is not None:
            self.chunks[self._chunk] += data
        if self._in_json:
            self.payload += data


def _parse(page: str) -> _Collector:
    collector = _Collector()
    collector.feed(page)
    return collector


def test_html_shows_each_chunk_once_and_escaped() -> None:
    result = hand_made_result()
    page = to_html(result)
    parsed = _parse(page)
    assert parsed.chunks == dict(enumerate(CHUNKS))
    assert "<script>alert" not in page
    context = page[page.index('id="showing"') : page.index("Top sources")]
    assert context.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; friends.") == 1
    assert "Document [1]" in page and "Document [2]" in page


def test_html_spans_are_in_text_order() -> None:
    parsed = _parse(to_html(hand_made_result()))
    assert parsed.span_order == {0: [1, 0], 1: [2, 3]}


def test_html_payload_has_the_score_shapes() -> None:
    result = hand_made_result()
    payload = json.loads(_parse(to_html(result)).payload)
    assert set(payload) == {"seq", "units", "alpha", "documents", "cited", "fold"}
    assert len(payload["seq"]) == len(payload["alpha"]["seq"]) == 4
    assert [len(row) for row in payload["units"]] == [len(row) for row in payload["alpha"]["units"]] == [4, 4]
    assert payload["units"][1] == pytest.approx(result.token_attr[1].tolist(), abs=1e-6)
    assert len(payload["documents"]["seq"]) == 2 and [len(row) for row in payload["documents"]["units"]] == [
        2,
        2,
    ]


def test_html_lists_top_sources_heads_and_groundedness() -> None:
    result = hand_made_result()
    page = to_html(result, title="My <title>")
    (best, _), *_ = result.top(1)
    table = page[page.index("Top sources") : page.index("Heads")]
    assert best.text in table
    assert "L0H1" in page and "L3H2" in page
    assert page.count('class="u"') == 2
    assert 'title="groundedness 0.100, support 0.000"' in page
    assert "<title>My &lt;title&gt;</title>" in page


def test_html_and_report_flag_the_unsupported_tokens() -> None:
    from rcattr.cli import report

    result = hand_made_result()
    low, high = SUPPORT_THRESHOLD / 2, (1 + SUPPORT_THRESHOLD) / 2
    result.rc = replace(
        result.rc, token_support=torch.tensor([high, high, low, low, high, high, low, high, low])
    )  # "330", " metres", " opened", "1889.": the documents hold "330" and "1889" whole, which are not flagged
    page = to_html(result)
    assert page.count('class="g low"') == 2 + 1  # one more in the legend
    assert f'title="groundedness 0.300, support {low:.3f}">330<' in page  # its support shown, not flagged
    assert f"below {SUPPORT_THRESHOLD:.2f}" in page
    text = report(result, top=1)
    assert f"token support < {SUPPORT_THRESHOLD:.2f}" in text
    assert f"'metres' ({low:.2f}), 'opened' ({low:.2f})" in text and "'330' (" not in text
    result.rc = None
    assert page.count('class="g low"') > to_html(result).count('class="g low"') == 1
    assert "token support" not in report(result, top=1)


@pytest.mark.parametrize(
    "spans",
    [
        [whole_span(CHUNKS[0], 0), whole_span(CHUNKS[1], 1)],
        [TextSpan(4, 10, CHUNKS[0][4:10], 0), TextSpan(20, 25, CHUNKS[1][20:25], 1)],
        [TextSpan(0, 3, CHUNKS[0][:3], 0), TextSpan(3, 10, CHUNKS[0][3:10], 0), whole_span(CHUNKS[1], 1)],
    ],
    ids=["full-chunks", "gaps", "touching"],
)
def test_any_spans_render_the_full_chunks(spans: list[TextSpan]) -> None:
    result = hand_made_result(spans)
    assert _parse(to_html(result)).chunks == dict(enumerate(CHUNKS))
    plain = to_terminal(result, color=False, width=10_000)
    assert all(chunk in re.sub(r"\[/?\d(:[\d.]+)?\]", "", plain) for chunk in CHUNKS)


def _alphas(page: str) -> list[float]:
    """The shade of each context span as the page first shows it (the whole answer), in text order."""
    return [float(alpha) for alpha in re.findall(r"rgba\(255,140,0,([0-9.]+)\)", page)]


def _payload(page: str) -> dict:
    return json.loads(_parse(page).payload)


def test_shading_separates_the_sources_from_the_noise() -> None:
    # 36 documents as on the Veri-Gran page (docs/html_36_documents_*.png): two the answer draws on, the
    # gold at 0.058, and 33 near an even share; the square root of the share shaded them 0.29, 0.21 and 0.15
    shares = torch.full((36,), 0.025)
    shares[[2, 10]], shares[6] = 0.113, 0.058
    shares[20:] = 0.022
    alphas = _alphas(to_html(documents_result(shares.tolist())))
    assert alphas[2] == alphas[10] == 0.85  # the best spans: darkest
    assert 0.2 < alphas[6] < 0.4  # well above an even share: visible, paler than the best
    noise = [alpha for i, alpha in enumerate(alphas) if i not in (2, 6, 10)]
    assert max(noise) < 0.05 < alphas[6] / 4  # near an even share: (almost) unshaded
    assert _alphas(to_html(documents_result([0.9, 0.1]))) == [0.85, 0.0]  # below an even share: unshaded


def test_a_flat_context_stays_unshaded() -> None:
    page = to_html(documents_result([0.01] * 100))  # nothing stands out: nothing is shaded
    assert set(_alphas(page)) == {0.0}
    assert _payload(page)["alpha"]["units"] == [[0.0] * 100]


def test_each_unit_is_shaded_against_its_own_best_span() -> None:
    result = hand_made_result()
    payload = _payload(to_html(result))
    for row, scores in zip(payload["alpha"]["units"], result.token_attr, strict=True):
        best = int(scores.argmax())
        assert row[best] == 0.85
        below = [i for i, score in enumerate(scores.tolist()) if score <= scores.mean()]
        assert below and all(row[i] == 0 for i in below)


def _opened(page: str) -> list[int]:
    return [
        int(n)
        for n in re.findall(r'<details class="chunk" data-d="\d+" open><summary><h3>Document \[(\d+)\]', page)
    ]


def test_many_documents_open_only_the_cited_ones() -> None:
    shares = torch.full((500,), 0.5 / 498)
    shares[[7, 300]] = 0.25
    page = to_html(documents_result(shares.tolist()))
    assert _opened(page) == [8, 301]
    assert page.count('<details class="chunk uncited" data-d=') == 498 and "<details" not in page.replace(
        '<details class="chunk', ""
    )
    assert "500 documents: the 2 cited for the answer open, the other 498 folded" in page
    assert '<span class="cite">cited [8]</span> <span class="share">25.0% of the answer' in page
    few = to_html(documents_result([0.7, 0.2, 0.1]))  # ten or fewer: all open, the uncited ones grey
    assert _opened(few) == [1] and few.count('<details class="chunk uncited" data-d="') == 2
    assert few.count('" open><summary>') == 3 and 'id="folding"' not in few and not _payload(few)["fold"]


def test_the_page_follows_the_citations_of_each_unit() -> None:
    # 12 documents: output 1 draws on documents 1 and 2 (0.8 of the best apart or closer), output 2 on
    # document 6 alone, both on document 2; the rest is noise
    first = [0.4, 0.34, 0.05] + [0.21 / 9] * 9
    second = [0.05, 0.3, 0.02, 0.03, 0.02, 0.5] + [0.08 / 6] * 6
    result = units_result([first, second])
    page = to_html(result)
    payload = _payload(page)
    cited = [[source.number - 1 for source in citation.sources] for citation in result.citations()]
    assert payload["cited"] == {"seq": [0, 1, 5], "units": cited} and cited == [[0, 1], [5]]
    assert _opened(page) == [1, 2, 6]
    assert payload["fold"] and "12 documents: the 3 cited for the answer open, the other 9 folded" in page
    assert re.findall(r'<span class="cite">cited \[(\d+)\]', page) == ["1", "2", "6"]
    for unit in (0, 1):  # the labels a pinned unit shows: its own documents' shares
        assert payload["documents"]["units"][unit] == pytest.approx(
            result.document_scores(unit).tolist(), abs=1e-6
        )
    shares = [float(share) for share in re.findall(r'<span class="share">([\d.]+)% of the answer', page)]
    assert shares == pytest.approx([100 * share for share in result.document_scores().tolist()], abs=0.05)


def test_the_script_pins_labels_and_folding_to_the_unit() -> None:
    page = to_html(units_result([[0.9, 0.1] + [0.0] * 10, [0.0] * 11 + [1.0]]))
    script = page.split("<script>")[-1]
    assert "% of ${viewName(u)}" in script  # the share labels follow the hovered or pinned unit
    assert "el.open = cited.includes(+el.dataset.d)" in script  # pinning opens the unit's cited documents
    assert "show(pinned);\n    fold(pinned);" in script  # and unpinning (pinned = null) the answer's again


def test_text_direction_follows_the_text() -> None:
    # Arabic or Hebrew reads right to left: every element holding answer or context text takes its own direction
    page = to_html(documents_result([0.5, 0.5]))
    assert '<div class="text" dir="auto" id="answer">' in page
    assert page.count('<div class="text" dir="auto" data-chunk=') == 2
    top_sources = page.split("<h2>Top sources</h2>")[1].split("</table>")[0]
    assert top_sources.count('<td dir="auto">') == 2  # one per span, holding its text
    assert 'item.dir = "auto"' in page  # the hovered unit's sources, listed by the script


@pytest.mark.parametrize("name", ["report.png", "report", "report.html.txt"])
def test_save_html_refuses_a_name_that_is_not_html(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match=rf"end the name with .html or .htm, got '{name}'"):
        save_html(hand_made_result(), tmp_path / name)
    assert not (tmp_path / name).exists()
    assert (
        save_html(hand_made_result(), tmp_path / "report.HTM")
        .read_text(encoding="utf-8")
        .startswith("<!DOCTYPE")
    )
