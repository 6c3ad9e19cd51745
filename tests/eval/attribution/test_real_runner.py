"""The attribution benchmark on the offline default model and the shipped QuoteSum file (a few records)."""

from __future__ import annotations

import json

import pytest

from rcattr.eval.attribution.cli import main

pytestmark = pytest.mark.real_model


def test_quotesum_runner_on_the_default_model(tmp_path) -> None:
    out = tmp_path / "quotesum"
    assert (
        main(["--dataset", "quotesum", "--limit", "4", "--methods", "rc,sweep,bm25", "--out", str(out)]) == 0
    )
    results = json.loads((out / "results.json").read_text())
    methods = results["methods"]
    assert results["model"] == "SmolLM2-135M-Instruct" and results["n_records"] == 4
    assert methods["rc"]["n_spans"] == methods["bm25"]["n_spans"] > 4
    # the standalone default attributor and the sweep's default row are the same computation
    assert methods["rc"]["accuracy"] == methods["default: RCAttributor()"]["accuracy"]
    assert len(results["sweep"]) == 2 * 2 * 11  # 2 scorers x top/bottom x (10 values of k + all)
