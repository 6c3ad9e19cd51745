"""The long-generation benchmark's report (rcattr.eval.kv_long.report): every method paired with RC."""

from __future__ import annotations

import pytest

from rcattr.eval.kv_long.report import summarise_long, table_long


def test_summary_pairs_every_method_with_rc_on_the_common_records() -> None:
    def row(method: str, record: str, kl: float) -> dict:
        return {
            "method": method, "id": record, "quality": 0.5, "kl": kl, "top1": 0.9, "peak_bytes": 10,
            "full_peak_bytes": 40, "tokens_per_second": 5.0, "answer_tokens": 3, "reference_tokens": 3,
            "nbytes": [8, 10, 10],
        }  # fmt: skip

    rows = [row("rc", r, 0.1) for r in "abc"] + [
        row("kvpress_knorm", r, 0.3 + 0.1 * i) for i, r in enumerate("ab")
    ]
    header = {
        "config": {"task": "qmsum"},
        "model": "m",
        "budget": "b",
        "max_new_tokens": 4,
        "quality": "rougeL",
    }
    results = summarise_long(rows, ["rc", "kvpress_knorm"], header)
    assert results["n_records"] == 2  # c is not done by every method
    knorm = results["methods"]["kvpress_knorm"]
    assert knorm["kl"]["mean"] == pytest.approx(0.35) and knorm["peak_ratio"] == 0.25
    assert knorm["kl_minus_rc"]["mean"] == pytest.approx(0.25)
    interval = knorm["kl_minus_rc"]
    assert interval["low"] == pytest.approx(0.2) and interval["high"] == pytest.approx(0.3)
    assert "kl_minus_rc" not in results["methods"]["rc"] and knorm["nbytes"] == [8, 10, 10]
    assert "| kvpress_knorm | 0.3500 [" in table_long(results)
