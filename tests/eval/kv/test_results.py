"""The KV benchmark's summary (rcattr.eval.kv.results): matched-compression differences and old record lines."""

from __future__ import annotations

import math

import pytest

from rcattr.eval.kv.results import summarise
from rcattr.eval.kv.tables import markdown_table
from tests.helpers import kv_row


def test_matched_differences_interpolate_each_record_and_pair_the_records() -> None:
    rows = []
    for i in range(30):
        record, hard = f"q{i}", (i % 5) / 10  # records differ; the methods' gaps do not
        rows += [
            kv_row("press/r=0.4", {"ratio": 0.4}, record, 0.2 + hard, 0.4, 1.0),
            kv_row("press/r=0.8", {"ratio": 0.8}, record, 0.6 + hard, 0.8, 0.0),
            kv_row("rc/c=1/w=16", {"c": 1.0, "window": 16}, record, 0.3 + hard, 0.5, 1.0),
            kv_row("rc/c=2/w=16", {"c": 2.0, "window": 16}, record, 0.5 + hard, 0.7, 1.0),
            kv_row(
                "rc/c=1/w=16/sinks=4",
                {"c": 1.0, "window": 16, "variant": "sinks=4"},
                record,
                0.2 + hard,
                0.4,
                1.0,
            ),
            kv_row(
                "rc/c=2/w=16/sinks=4",
                {"c": 2.0, "window": 16, "variant": "sinks=4"},
                record,
                0.6 + hard,
                0.8,
                1.0,
            ),
        ]
    header = {"config": {"dataset": "needle"}, "model": "m", "protocol": "p", "question_format": "q"}
    results = summarise(
        rows, [row["method"] for row in rows[:6]], {**header, "max_new_tokens": 4, "quality": "match"}
    )
    matched = results["matched"]["rc/c=1/w=16"]
    assert matched["press_ver"]["press"] == pytest.approx(0.3 + 0.2)  # 0.2 + hard at 40%, 0.6 + hard at 80%
    ver, low, high = matched["difference"]["press"]["ver"]
    assert ver == pytest.approx(-0.0) and low == pytest.approx(0.0) and high == pytest.approx(0.0)
    assert matched["difference"]["press"]["match"][0] == pytest.approx(1 - 0.75)  # press match 0.75 at 50%
    lever = results["levers"]["sinks=4, w = 16"]["at"]
    assert lever["0.5"]["ver"] == pytest.approx(0.3 + 0.2) and lever["0.7"]["ver"] == pytest.approx(0.5 + 0.2)
    assert lever["0.5"]["ver_difference"] == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    assert results["levers"]["paper, w = 16"]["at"]["0.5"]["ver_difference"] is None  # the baseline itself
    table = markdown_table(results)
    assert "+0.000 [+0.000, +0.000] · +0.250 [+0.250, +0.250]" in table


def test_runs_from_before_answer_match_still_report() -> None:
    row = {
        "method": "full",
        "name": "full",
        "setting": {},
        "id": "q",
        "ver": 0.0,
        "rouge1": 0.5,
        "rougeL": 0.5,
    }
    row |= {"compression_ratio": 0.0, "bytes_ratio": 1.0, "seconds": 1.0}  # no "match": an older record line
    header = {
        "config": {"dataset": "squad"},
        "model": "m",
        "protocol": "p",
        "question_format": "q",
        "max_new_tokens": 4,
    }
    results = summarise([row], ["full"], header)
    assert math.isnan(results["methods"]["full"]["match"])
    table = markdown_table(results)
    assert "answer match —" in table
