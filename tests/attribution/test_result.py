"""RCAttributionResult on hand-made scores: top(k), unique keys, tables, JSON, notebook HTML and captum plots."""

from __future__ import annotations

import datetime
import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

from rcattr.attribution.result import RCAttributionResult
from rcattr.heads.selection import HeadSelection
from rcattr.record.attributed import AttributedAnswer, AttributedContext
from rcattr.record.signals import RCSignals
from rcattr.text.documents import Document
from rcattr.text.segmentation import TextSpan
from tests.helpers.cited import supported_result

matplotlib.use("Agg")

CHUNKS = [
    "Yes. The tower is 330 metres tall. Yes.",
    "Yes. <script>alert(1)</script> It opened in 1889, after two years of building work on the Champ de Mars.",
]
ANSWER = "It is 330 metres tall. It opened in 1889."


def _span(source: int, piece: str, nth: int = 0) -> TextSpan:
    start = -1
    for _ in range(nth + 1):
        start = CHUNKS[source].index(piece, start + 1)
    return TextSpan(start, start + len(piece), piece, source)


SPANS = [
    _span(0, "Yes."),
    _span(0, "The tower is 330 metres tall."),
    _span(0, "Yes.", nth=1),
    _span(1, "Yes."),
    _span(1, "<script>alert(1)</script>"),
    _span(1, "It opened in 1889, after two years of building work on the Champ de Mars."),
]
OUTPUTS = [TextSpan(0, 22, ANSWER[:22]), TextSpan(23, len(ANSWER), ANSWER[23:])]


def _result(head_selection: HeadSelection | None = None, groundedness: bool = False) -> RCAttributionResult:
    token_attr = torch.tensor([[0.05, 0.7, 0.05, 0.05, 0.05, 0.1], [0.02, 0.08, 0.02, 0.02, 0.06, 0.8]])
    tokens = [TextSpan(0, 2, "It"), TextSpan(3, 5, "is")]
    rc = None
    if groundedness or head_selection is not None:
        rc = RCSignals(
            groundedness=torch.tensor([0.9, 0.2]),
            lookback=torch.tensor([0.8, 0.3]),
            unit_context_reliance=torch.tensor([0.8, 0.3]),
            token_logprob=torch.tensor([-0.5, -4.0]),
            token_peak=torch.tensor([0.99, 0.6]),
            token_support=torch.tensor([0.9, 0.1]),
            head_selection=head_selection
            or HeadSelection(torch.eye(2), torch.tensor([[0, 0]]), "superiority"),
        )
    return RCAttributionResult(
        token_attr.mean(0),
        token_attr,
        context=AttributedContext.of_texts(CHUNKS, SPANS),
        output=AttributedAnswer(ANSWER, OUTPUTS, tokens),
        span_scorer="rc_expectation",
        rc=rc,
    )


def test_top_checks_k() -> None:
    result = _result()
    assert [span.text for span, _ in result.top(1)] == [SPANS[5].text]
    assert len(result.top(None)) == len(result.top(100)) == len(SPANS)  # None or more than there are: all
    assert len(result.top(np.int64(2))) == 2
    for k in (0, -1, True, 2.0, "3"):
        with pytest.raises(
            ValueError, match=r"k must be a whole number >= 1 \(or None for every span\), got"
        ):
            result.top(k)  # type: ignore[arg-type]


def test_a_token_of_a_claim_the_documents_hold_whole_is_not_flagged() -> None:
    """Issue 59: the first piece of a copied acronym (" O" of "OAPEC") was flagged and shown red; a claim the
    documents hold whole is in the context, whatever its pieces' support. Unheld claims are still flagged."""
    support = [0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.1, 0.1]  # "330" (held), "Bread", "<3" (unheld)
    assert supported_result(support).unsupported_tokens() == [9, 10]


def test_unsupported_tokens_checks_the_threshold() -> None:
    result = _result(groundedness=True)
    result.rc = replace(result.rc, token_support=torch.tensor([0.1, 0.99]))
    assert result.unsupported_tokens(0.5) == [0] and result.unsupported_tokens(np.float32(1)) == [0, 1]
    for threshold in (float("nan"), "x", -0.1, 1.5, True, None):
        with pytest.raises(ValueError, match=r"threshold must be a real number in \[0, 1\] .*, got"):
            result.unsupported_tokens(threshold)  # type: ignore[arg-type]


def test_seq_attr_dict_keeps_every_span() -> None:
    scores = _result().seq_attr_dict
    assert list(scores) == [
        "Yes. [doc 1]",
        "The tower is 330 metres tall.",
        "Yes. [doc 1] (2)",  # the same text twice in one document
        "Yes. [doc 2]",
        "<script>alert(1)</script>",
        SPANS[5].text,
    ]
    assert list(scores.values()) == _result().seq_attr.tolist()


def test_dataframe_puts_the_text_last() -> None:
    table = _result().to_dataframe(output=1)
    assert list(table.columns) == ["score", "document", "source", "start", "end", "text"]
    assert table.iloc[0].tolist()[1:] == [2, 1, SPANS[5].start, SPANS[5].end, SPANS[5].text]


def test_to_dict_round_trips_through_json() -> None:
    selection = HeadSelection(
        torch.rand(2, 3),
        torch.tensor([[1, 2], [0, 0]]),
        "rc_std",
        torch.tensor([0.5, 1.0]),
        reach=torch.tensor([1.0, 0.5], dtype=torch.float64),  # layer 1's window reaches half the context
    )
    result = _result(selection, groundedness=True)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["answer"] == ANSWER and data["chunks"] == CHUNKS and data["span_scorer"] == "rc_expectation"
    spans = [TextSpan(s["start"], s["end"], s["text"], s["source"]) for s in data["context_spans"]]
    assert spans == SPANS and [s["document"] for s in data["context_spans"]] == [1, 1, 1, 2, 2, 2]
    assert [TextSpan(s["start"], s["end"], s["text"]) for s in data["output_spans"]] == OUTPUTS
    assert torch.tensor(data["token_attr"]).equal(result.token_attr)  # floats survive JSON exactly
    assert data["groundedness"] == pytest.approx([0.9, 0.2]) and data["lookback"] == pytest.approx([0.8, 0.3])
    assert data["context_reliance"] == pytest.approx(0.55) and data["unit_context_reliance"] == pytest.approx(
        [0.8, 0.3]
    )
    assert data["token_logprob"] == pytest.approx([-0.5, -4.0]) and data["token_peak"] == pytest.approx(
        [0.99, 0.6]
    )
    assert data["token_support"] == pytest.approx([0.9, 0.1]) and data["unsupported_tokens"] == [1]
    assert data["heads"] == {
        "kind": "rc_std",
        "selected": [[1, 2], [0, 0]],
        "weights": [0.5, 1.0],
        "outliers": None,
        "few_heads": False,
        "lexical_share": None,
        "seeing": 3,
        "reach": [1.0, 0.5],
    }
    baseline = json.loads(json.dumps(_result().to_dict()))
    assert baseline["groundedness"] is None and baseline["heads"] is None
    assert baseline["context_reliance"] is None and baseline["unit_context_reliance"] is None
    assert all(
        baseline[name] is None for name in ("lookback", "token_logprob", "token_peak", "token_support")
    )
    assert baseline["unsupported_tokens"] == []


def test_dataframe_carries_the_context_reliance() -> None:
    result = _result(groundedness=True)
    assert result.to_dataframe().attrs["context_reliance"] == pytest.approx(0.55)
    assert result.to_dataframe(output=1).attrs["context_reliance"] == pytest.approx(0.3)
    assert _result().to_dataframe(output=1).attrs["context_reliance"] is None


def test_notebook_html_is_escaped() -> None:
    page = _result()._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<tr>") == 1 + 2 * 3  # a header, then each output unit's top 3 spans
    assert ANSWER in page and '<p dir="auto">' in page


def test_captum_plots_get_short_labels() -> None:
    import matplotlib.pyplot as plt

    result = _result()
    figure, axes = result.plot_seq_attr()
    labels = [label.get_text() for label in axes.get_xticklabels()]
    assert labels[1] == "[1] The tower is 330 metres t…" and max(map(len, labels)) <= 30
    figure, axes = result.plot_token_attr()
    assert [label.get_text() for label in axes.get_yticklabels()] == [ANSWER[:22], ANSWER[23:]]
    assert max(len(label.get_text()) for label in axes.get_xticklabels()) <= 30
    assert result.input_tokens == [span.text for span in SPANS]  # captum's fields are left as they were
    plt.close("all")


def test_head_selection_says_when_it_rests_on_few_heads() -> None:
    scores, one = torch.rand(6, 12), torch.tensor([[2, 3]])
    few = HeadSelection(scores, one, "superiority", outliers=1, minimum=4)
    assert few.few_heads
    assert few.describe() == (
        "1 head selected by superiority, the heads more than 2 sd above the mean head; fewer than 4 (5% of "
        "the model's 72): the attribution rests on few heads' votes (a fixed top_k spreads it)"
    )
    enough = HeadSelection(
        scores, torch.tensor([[0, 0], [1, 1], [2, 2], [3, 3]]), "superiority", outliers=4, minimum=4
    )
    assert not enough.few_heads
    assert (
        enough.describe() == "4 heads selected by superiority, the heads more than 2 sd above the mean head"
    )
    assert HeadSelection(scores, one, "fixed").describe() == "1 head selected by fixed"
    assert _result(few).to_dict()["heads"]["few_heads"] is True


def test_to_dict_is_plain_json_whatever_the_metadata() -> None:
    class Tag:
        def __str__(self) -> str:
            return "tag"

    metadata = {
        "published": datetime.date(2024, 5, 1),
        "fetched": datetime.datetime(2024, 5, 2, 13, 30),
        "title": b"caf\xc3\xa9 \xff",
        "nested": {"pages": (1, np.int64(2)), 3: {datetime.date(2020, 1, 1)}, "score": np.float32(0.5)},
        "path": Path("docs/a.md"),
        "price": Decimal("1.10"),
        "missing": float("nan"),
        "tag": Tag(),
        "vector": np.array([1.5, 2.5]),
        "ok": True,
    }
    result = _result()
    result.documents[0] = Document(CHUNKS[0], metadata, id="doc-1")
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["documents"][0] == {
        "document": 1,
        "id": "doc-1",
        "metadata": {
            "published": "2024-05-01",
            "fetched": "2024-05-02T13:30:00",
            "title": "café \ufffd",
            "nested": {"pages": [1, 2], "3": ["2020-01-01"], "score": 0.5},
            "path": str(Path("docs/a.md")),
            "price": "1.10",
            "missing": None,
            "tag": "tag",
            "vector": [1.5, 2.5],
            "ok": True,
        },
    }
    assert result.documents[0].metadata is metadata  # the result keeps the application's own
