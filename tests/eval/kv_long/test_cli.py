"""The long-generation benchmark's command line (rcattr.eval.kv_long.cli) end to end."""

from __future__ import annotations

import json
import math

import pytest

from rcattr.eval.kv_long.cli import main
from tests.helpers import SQUAD, data_folder, save_tiny, wide_llama


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    return save_tiny(wide_llama(), tmp_path_factory.mktemp("tiny-llama"))


def test_the_needle_task_runs_end_to_end_and_resumes(saved_model, tmp_path, monkeypatch) -> None:
    data = data_folder(tmp_path, monkeypatch, "squad_v2/dev-v2.0.json", json.dumps(SQUAD))
    out = data / "long"
    arguments = ["--task", "needle", "--model", str(saved_model), "--out", str(out), "--limit", "2"]
    options = ["--methods", "rc,rc_prefill_only", "--budget", "200", "--every", "8", "--prefix-tokens", "20"]
    assert main([*arguments, *options, "--max-new-tokens", "3"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["quality"] == "match" and results["n_records"] == 2
    assert list(results["methods"]) == ["full", "rc", "rc_prefill_only"]
    full, rc = results["methods"]["full"], results["methods"]["rc"]
    assert full["kl"]["mean"] == 0.0 and full["top1"]["mean"] == 1.0 and full["peak_ratio"] == 1.0
    assert rc["kl"]["mean"] >= 0.0 and not math.isnan(rc["kl"]["mean"]) and rc["peak_ratio"] < 1.0
    assert (out / "bytes_held.png").stat().st_size > 0 and "| rc_prefill_only |" in (
        out / "results.md"
    ).read_text()
    lines = (out / "records.jsonl").read_text().splitlines()
    assert len(lines) == 6
    assert main([*arguments, *options, "--max-new-tokens", "3"]) == 0  # resumed: nothing to run
    assert (out / "records.jsonl").read_text().splitlines() == lines
