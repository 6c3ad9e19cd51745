"""The groundedness benchmark (rcattr.eval.groundedness.benchmark): a report rewritten from its rows, and the
AttributionBench task's run."""

from __future__ import annotations

import json

import pytest

from rcattr.eval.groundedness.cli import main
from rcattr.eval.kv import data as kv_data
from tests.helpers import PAIRED_ARTICLES
from tests.helpers.data import attributionbench_lines


@pytest.mark.slow
def test_report_only_rewrites_the_report_from_the_rows_without_the_model(monkeypatch, saved_llama, tmp_path):
    monkeypatch.setattr(kv_data, "squad_articles", lambda: PAIRED_ARTICLES)
    out = tmp_path / "run"
    common = ["--task", "relevance", "--limit", "4", "--max-new-tokens", "3", "--out", str(out)]
    main([*common, "--model", str(saved_llama)])
    results = json.loads((out / "results.json").read_text())
    (out / "results.json").unlink()
    monkeypatch.setattr(
        "rcattr.runtime.models.load_model", lambda *args, **kwargs: pytest.fail("the model was loaded")
    )
    main([*common, "--model", str(saved_llama), "--report-only"])
    assert json.loads((out / "results.json").read_text()) == results
    assert results["relevance"]["random"]["questions"] == 4


@pytest.mark.slow
def test_attributionbench_rows_and_the_report_rewritten_from_them_without_the_model(
    monkeypatch, saved_llama, tmp_path
) -> None:
    claims = tmp_path / "dev.jsonl"
    claims.write_text(attributionbench_lines())
    out = tmp_path / "run"
    common = ["--task", "attributionbench", "--claims-file", str(claims), "--out", str(out)]
    main([*common, "--model", str(saved_llama)])
    results = json.loads((out / "results.json").read_text())["attributionbench"]
    assert results["claims"] == 24 and results["skipped"] == {"ExpertQA": 1}
    assert set(results["auroc"]) >= {"support", "coverage", "judge", "combined", "probe"}
    assert set(results["sources"]) == {"all", "ExpertQA", "LFQA"} and results["self_cut"] is not None
    assert set(results["sources"]["all"]["signals"]) == {
        "support",
        "coverage",
        "logprob",
        "calibrated",
        "probe",
    }
    assert "AttributionBench: 24 claims" in (out / "results.md").read_text()
    monkeypatch.setattr(
        "rcattr.runtime.models.load_model", lambda *args, **kwargs: pytest.fail("the model was loaded")
    )
    main([*common, "--model", str(saved_llama), "--report-only"])
    assert json.loads((out / "results.json").read_text())["attributionbench"] == results
