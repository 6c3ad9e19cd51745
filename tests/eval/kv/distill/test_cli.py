"""``python -m rcattr.eval.kv.distill`` (rcattr.eval.kv.distill.cli) end to end on a tiny model: it fits, saves,
reports and resumes."""

from __future__ import annotations

import json

import pytest

from rcattr.kvcache.distilled import ScorePredictor
from tests.helpers import kv_model, save_tiny


@pytest.mark.slow
def test_the_command_fits_saves_and_reports(tmp_path, monkeypatch) -> None:
    from rcattr.eval.kv.distill.cli import main

    model_dir = save_tiny(kv_model("llama"), tmp_path / "tiny")
    main(["--model", str(model_dir), "--out", str(tmp_path / "run"), "--contexts", "4", "--held-out", "1",
          "--context-tokens", "300", "--folds", "2"])  # fmt: skip
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(results["contexts"]) == 4 and len(results["held_out_contexts"]) == 1
    assert set(results["per_layer"]) == {"0", "1", "2"}
    assert -1.0 <= results["held_out"]["spearman"] <= 1.0
    predictor = ScorePredictor.load(tmp_path / "run" / "predictor.safetensors")
    assert predictor.layers == [0, 1, 2] and predictor.info["held_out"] == results["held_out"]
    assert "rank correlation" in (tmp_path / "run" / "results.md").read_text()
    files = sorted(path.name for path in (tmp_path / "run" / "teacher").iterdir())
    main(["--model", str(model_dir), "--out", str(tmp_path / "run"), "--contexts", "4", "--held-out", "1",
          "--context-tokens", "300", "--folds", "2"])  # fmt: skip  # resumed: nothing computed again
    assert sorted(path.name for path in (tmp_path / "run" / "teacher").iterdir()) == files
