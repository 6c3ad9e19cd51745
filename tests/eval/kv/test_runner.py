"""The KV benchmark runner end to end on a tiny saved model and a tiny SQuAD-format file."""

from __future__ import annotations

import json

import pytest

from rcattr.eval.kv import main
from rcattr.eval.kv.presses import PRESSES
from tests.helpers import (
    without_timings,
)


def _arguments(saved_model, out, *extra: str) -> list[str]:
    return ["--dataset", "squad", "--model", str(saved_model), "--out", str(out), *extra]


def _run(saved_model, out, *extra: str) -> dict:
    assert main(_arguments(saved_model, out, "--max-new-tokens", "4", *extra)) == 0
    return json.loads((out / "results.json").read_text())


def _lines(out) -> int:
    return len((out / "records.jsonl").read_text().splitlines())


@pytest.mark.usefixtures("unchanged_process_state")
def test_rc_runs_without_kvpress_writes_the_report_and_resumes(saved_model, data, capsys) -> None:
    out = data / "run"
    results = _run(
        saved_model, out, "--methods", "rc", "--c", "0.5,1.0", "--window", "8", "--rc-variants", "paper"
    )
    methods = results["methods"]
    assert list(methods) == ["full", "rc/c=0.5/w=8", "rc/c=1/w=8"]
    assert results["n_records"] == 2 and _lines(out) == 6  # the unanswerable questions are left out
    assert (
        methods["full"]["ver"] == pytest.approx(0.0, abs=1e-12) and methods["full"]["compression_ratio"] == 0
    )
    assert 0 < methods["rc/c=0.5/w=8"]["compression_ratio"] < methods["rc/c=1/w=8"]["compression_ratio"] < 1
    assert methods["rc/c=1/w=8"]["ver"] > 0 and methods["rc/c=1/w=8"]["bytes_ratio"] < 1
    assert {"rouge1", "rougeL", "seconds"} <= set(methods["rc/c=1/w=8"])
    assert results["head_correlation"]["rc/c=1/w=8"]["n_heads"] == 2 * 3 * 2  # records x layers x key heads
    for name in ("results.md", "frontier.png", "head_compression.png"):
        assert (out / name).stat().st_size > 0
    assert "| rc | c = 1, w = 8 |" in capsys.readouterr().out
    assert "| 8 | " in (out / "results.md").read_text().split("### Every method")[0]  # the RC summary row

    _run(saved_model, out, "--methods", "rc", "--c", "0.5,1.0", "--window", "8", "--rc-variants", "paper")
    assert _lines(out) == 6  # nothing ran again
    results = _run(
        saved_model, out, "--methods", "rc", "--c", "0.5,1.0,2.0", "--window", "8", "--rc-variants", "paper"
    )
    assert _lines(out) == 8 and "rc/c=2/w=8" in results["methods"]
    with pytest.raises(SystemExit, match="other settings.*max_new_tokens"):
        main(_arguments(saved_model, out, "--methods", "rc", "--max-new-tokens", "5"))


def test_separate_shards_merged_equal_a_single_run(saved_model, data, capsys) -> None:
    settings = ("--methods", "rc", "--c", "1.0", "--window", "8")
    single = _run(saved_model, data / "single", *settings)
    out = data / "sharded"
    assert main(_arguments(saved_model, out, "--max-new-tokens", "4", *settings, "--shard", "1/2")) == 0
    partial = _run(saved_model, out, *settings, "--report-only")  # runs nothing: the one finished record
    assert partial["n_records"] == 1 and not (out / "records.jsonl").exists()
    assert main(_arguments(saved_model, out, "--max-new-tokens", "4", *settings, "--shard", "0/2")) == 0
    assert "shard 0/2 done; 0 run(s)" in capsys.readouterr().out
    assert [len(path.read_text().splitlines()) for path in sorted(out.glob("records.shard-*"))] == [2, 2]
    merged = _run(saved_model, out, *settings)  # runs nothing, merges both shards
    assert not (out / "records.jsonl").exists()
    assert without_timings(merged) == without_timings(single)


def test_rc_variants_run_side_by_side_and_are_compared_at_matched_compression(saved_model, data) -> None:
    out = data / "variants"
    variants = "paper,value_norm,sinks=2+model_budget"
    results = _run(
        saved_model, out, "--methods", "rc", "--c", "0.3,1.0,3.0", "--window", "8", "--rc-variants", variants
    )
    labels = [label for label in results["methods"] if label != "full"]
    assert len(labels) == 9 and "rc/c=1/w=8/sinks=2+model_budget" in labels
    assert results["methods"]["rc/c=1/w=8/value_norm"]["setting"]["variant"] == "value_norm"
    levers = results["levers"]
    assert set(levers) == {"paper, w = 8", "value_norm, w = 8", "sinks=2+model_budget, w = 8"}
    assert all(lever["baseline"] == "paper, w = 8" for lever in levers.values())
    summary = (out / "results.md").read_text()
    assert "| 8, value_norm | " in summary and "### RCKVCache variants at matched compression" in summary
    with pytest.raises(SystemExit, match="unknown RCKVCache variant 'sink'"):
        main(_arguments(saved_model, data / "bad", "--methods", "rc", "--rc-variants", "sink"))


@pytest.mark.kvpress
def test_every_press_runs_and_reaches_its_ratio(saved_model, data) -> None:
    out = data / "presses"
    results = _run(
        saved_model, out, "--ratios", "0.3,0.6", "--c", "1.0", "--window", "8", "--rc-variants", "paper"
    )
    methods = results["methods"]
    assert len(methods) == 1 + 1 + 2 * len(PRESSES)
    for name in PRESSES:
        for ratio in (0.3, 0.6):
            row = methods[f"{name}/r={ratio:g}"]
            # kvpress keeps int(n (1 - ratio)) entries per head; PyramidKV spreads them over layers
            assert row["compression_ratio"] == pytest.approx(ratio, abs=0.02 if name != "pyramidkv" else 0.1)
            # AdaKV and KVzip's replay (kvgrad too) mask what they evict, and free nothing
            masks = name.startswith(("adakv", "critical_adakv")) or name in ("kvzip", "kvgrad")
            held = 1.0 if masks else 1 - row["compression_ratio"]
            assert row["bytes_ratio"] == pytest.approx(held, abs=1e-9)
            assert 0 < row["ver"] and row["n_records"] == 2
    summary = (out / "results.md").read_text().split("### Every method")[0]
    assert all(f"| {name} | " in summary for name in PRESSES)
    matched = results["matched"]["rc/c=1/w=8"]
    assert set(matched["press_ver"]) == set(PRESSES)
    for name, difference in matched["difference"].items():
        value, low, high = difference["ver"]
        assert matched["press_ver"][name] is not None and low <= value <= high
    assert results["seconds_per_example"].keys() == {"full", "rc", *PRESSES}


def test_the_needle_task_runs_and_reports_answer_match(saved_model, data) -> None:
    out = data / "needle"
    arguments = ["--dataset", "needle", "--model", str(saved_model), "--out", str(out), "--limit", "3"]
    options = ["--methods", "rc", "--c", "1.0", "--window", "8", "--rc-variants", "paper"]
    assert main([*arguments, "--max-new-tokens", "4", *options]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["quality"] == "match" and results["n_records"] == 3
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {row["id"] for row in rows} == {"needle-1024-0.1-0", "needle-1024-0.3-0", "needle-1024-0.5-0"}
    assert all(row["match"] in (0.0, 1.0) for row in rows)
    assert 0.0 <= results["methods"]["rc/c=1/w=8"]["match"] <= 1.0
    summary = (out / "results.md").read_text().split("### Every method")[0]
    assert "VER ↓ · answer match at each c" in summary
