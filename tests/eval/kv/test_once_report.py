"""The compress-once report (rcattr.eval.kv.once_report): means over the common questions, and paired
differences whose bootstrap draws contexts."""

from __future__ import annotations

import pytest

from rcattr.eval.kv.once_report import once_markdown, summarise_once

DEFAULT = "rc/r=0.5/w=16/model_budget+value_norm+sinks=4"
REPLAY = f"{DEFAULT}+replay"


def _row(method: str, name: str, setting: dict, context: int, question: int, match: bool, ver: float) -> dict:
    return {
        "method": method,
        "name": name,
        "setting": setting,
        "id": f"q{context}-{question}",
        "context_id": f"c{context}",
        "match": float(match),
        "ver": ver,
        "rougeL": float(match),
        "rouge1": float(match),
        "identical": match,
        "compression_ratio": setting.get("ratio", 0.0),
        "bytes_ratio": 1.0 - setting.get("ratio", 0.0),
        "prefill_cost": 1.0 if name != "kvzip" else 5.0,
    }


def _rows() -> list[dict]:
    rc = {"ratio": 0.5, "window": 16, "variant": "model_budget+value_norm+sinks=4"}
    methods = [
        ("full", "full", {}, lambda c, q: True, 0.0),
        ("kvzip/r=0.5", "kvzip", {"ratio": 0.5}, lambda c, q: True, 0.1),
        (DEFAULT, "rc", rc, lambda c, q: q != 2, 0.2),
        (REPLAY, "rc", {**rc, "variant": rc["variant"] + "+replay"}, lambda c, q: True, 0.1),
    ]
    return [
        _row(label, name, setting, c, q, hit(c, q), ver)
        for label, name, setting, hit, ver in methods
        for c in range(4)
        for q in range(3)
    ]


def test_the_summary_compares_with_the_full_cache_kvzip_and_the_default_recipe() -> None:
    rows = _rows()
    rows.append(_row("kvzip/r=0.5", "kvzip", {"ratio": 0.5}, 9, 0, True, 0.0))  # a context only kvzip has
    results = summarise_once(rows, ["full", "kvzip/r=0.5", DEFAULT, REPLAY], {"config": {}})
    assert results["n_contexts"] == 4 and results["n_questions"] == 12
    assert results["incomplete"] == ["kvzip/r=0.5"]
    assert results["methods"][DEFAULT]["match"] == pytest.approx(8 / 12)
    assert results["methods"]["kvzip/r=0.5"]["prefill_cost"] == 5.0
    against = results["comparisons"][DEFAULT]
    assert against["full"]["match"][0] == pytest.approx(-4 / 12)
    assert against["kvzip"]["ver"][0] == pytest.approx(0.1) and against["kvzip"]["match"][0] == pytest.approx(
        -4 / 12
    )
    # every context loses the same question: whichever contexts are drawn, the difference is the same
    assert against["full"]["match"][1] == pytest.approx(against["full"]["match"][2])
    lever = results["comparisons"][REPLAY]["default"]
    assert lever["label"] == DEFAULT and lever["match"][0] == pytest.approx(4 / 12)
    assert "default" not in against and "kvzip" not in results["comparisons"]["kvzip/r=0.5"]


def test_the_markdown_has_one_row_per_setting_and_the_levers() -> None:
    results = summarise_once(
        _rows(),
        ["full", "kvzip/r=0.5", DEFAULT, REPLAY],
        {"config": {"dataset": "needle", "context_tokens": 2048}, "model": "m", "protocol": "p"},
    )
    text = once_markdown(results)
    assert "| rc | r = 0.5, model_budget+value_norm+sinks=4 | 50.0% |" in text
    assert "| kvzip | r = 0.5 |" in text and "-0.333 [-0.333, -0.333]" in text
    assert f"| {REPLAY} | {DEFAULT} |" in text


def test_no_rows_give_an_empty_summary() -> None:
    results = summarise_once([], ["full"], {"config": {}})
    assert results["n_contexts"] == 0 and results["methods"] == {} and results["comparisons"] == {}
    assert results["n_questions"] == 0
