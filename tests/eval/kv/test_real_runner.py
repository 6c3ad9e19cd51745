"""The KV benchmark on the offline default model and the first SQuAD v2 question; marked, run in CI."""

from __future__ import annotations

import pytest

from rcattr.eval.kv import KVBenchmark, KVBenchmarkConfig

pytestmark = pytest.mark.real_model


def _rows(smollm2, tmp_path, **settings) -> dict[str, dict]:
    config = KVBenchmarkConfig("squad", limit=1, c=(1.0,), window=(16,), **settings)
    benchmark = KVBenchmark(config, *smollm2, tmp_path)
    benchmark.run()
    return {label: row for (label, _), row in benchmark.done().items()}


def test_rc_compresses_the_context_and_the_full_cache_answers(smollm2, tmp_path) -> None:
    rows = _rows(smollm2, tmp_path, methods=("rc",))
    full, rc = rows["full"], rows["rc/c=1/w=16/model_budget+value_norm+sinks=4"]  # RCKVCache's defaults
    assert "France" in full["answer"] and full["rouge1"] > 0 and full["ver"] == pytest.approx(0.0, abs=1e-12)
    assert 0.4 < rc["compression_ratio"] < 0.9 and rc["bytes_ratio"] < 0.7
    assert 0.0 < rc["ver"] < 1.0 and rc["reference_tokens"] == full["reference_tokens"]
    assert len(rc["head_compression"]) == 30 and len(rc["head_score"][0]) == 3  # layers x key heads


@pytest.mark.kvpress
def test_snapkv_reaches_its_ratio_on_the_real_model(smollm2, tmp_path) -> None:
    rows = _rows(smollm2, tmp_path, methods=("snapkv", "adakv_snapkv"), ratios=(0.5,))
    for label in ("snapkv/r=0.5", "adakv_snapkv/r=0.5"):
        assert rows[label]["compression_ratio"] == pytest.approx(0.5, abs=0.01)
        assert 0.0 < rows[label]["ver"] < 1.0
    assert rows["snapkv/r=0.5"]["bytes_ratio"] == pytest.approx(0.5, abs=0.01)
