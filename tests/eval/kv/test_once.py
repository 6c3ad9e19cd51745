"""The compress-once protocol (``--protocol once``) end to end on a tiny saved model and a tiny SQuAD file."""

from __future__ import annotations

import json

import pytest

from rcattr.eval.kv import main


def _once(saved_model, out, *extra: str) -> dict:
    arguments = ["--dataset", "squad", "--model", str(saved_model), "--out", str(out), "--protocol", "once"]
    assert main([*arguments, "--max-new-tokens", "4", "--context-tokens", "400", *extra]) == 0
    return json.loads((out / "results.json").read_text())


@pytest.mark.usefixtures("unchanged_process_state")
def test_once_compresses_each_context_once_and_asks_every_question_of_a_copy(
    saved_model, data, capsys
) -> None:
    out = data / "once"
    options = ("--methods", "rc", "--c", "", "--rc-ratios", "0.0,0.5", "--window", "4")
    results = _once(saved_model, out, *options)
    labels = [
        "full",
        "rc/r=0/w=4/model_budget+value_norm+sinks=4",
        "rc/r=0.5/w=4/model_budget+value_norm+sinks=4",
    ]
    assert list(results["methods"]) == labels
    assert results["n_contexts"] == 1 and results["n_questions"] == 2
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {row["context_id"] for row in rows} == {"squad-0-0"}
    nothing, half = results["methods"][labels[1]], results["methods"][labels[2]]
    # evicting nothing and keeping the question whole gives the full cache's answers and outputs exactly
    assert nothing["compression_ratio"] == 0 and nothing["ver"] == pytest.approx(0.0, abs=1e-6)
    assert nothing["identical"] == 1.0
    assert half["compression_ratio"] == pytest.approx(0.5, abs=0.02) and half["bytes_ratio"] < 0.6
    for row in rows:  # one prefill per (method, context): every question of it reports the same one
        same = [other for other in rows if other["method"] == row["method"]]
        assert {other["prefill_seconds"] for other in same} == {row["prefill_seconds"]}
    assert results["methods"]["full"]["prefill_cost"] == pytest.approx(1.0)
    difference = results["comparisons"][labels[2]]["full"]["match"]
    assert difference[1] <= difference[0] <= difference[2]
    assert "| rc | r = 0.5, model_budget+value_norm+sinks=4 |" in capsys.readouterr().out
    assert "prefill × full" in (out / "results.md").read_text()

    _once(saved_model, out, *options)
    assert len((out / "records.jsonl").read_text().splitlines()) == 6  # resumed: nothing ran again


def test_once_compares_variants_with_the_default_recipe(saved_model, data) -> None:
    variants = "model_budget+value_norm+sinks=4,model_budget+value_norm+sinks=4+max_pool,model_budget+value_norm+sinks=4+replay"
    results = _once(
        saved_model,
        data / "levers",
        "--methods",
        "rc",
        "--c",
        "",
        "--rc-ratios",
        "0.5",
        "--window",
        "4",
        "--rc-variants",
        variants,
    )
    comparisons = results["comparisons"]
    default = "rc/r=0.5/w=4/model_budget+value_norm+sinks=4"
    for variant in ("max_pool", "replay"):
        lever = comparisons[f"{default}+{variant}"]["default"]
        assert lever["label"] == default and lever["ver"][1] <= lever["ver"][0] <= lever["ver"][2]
        assert results["methods"][f"{default}+{variant}"]["compression_ratio"] == pytest.approx(0.5, abs=0.02)
    assert "default" not in comparisons[default]
    assert results["methods"][f"{default}+replay"]["prefill_cost"] > 0


def test_once_settings_are_checked() -> None:
    from rcattr.eval.kv import KVBenchmarkConfig

    with pytest.raises(ValueError, match="unknown protocol"):
        KVBenchmarkConfig("squad", protocol="twice")
    with pytest.raises(ValueError, match="questions"):
        KVBenchmarkConfig("squad", questions=3)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        KVBenchmarkConfig("squad", rc_ratios=(1.0,))
    assert "protocol" not in KVBenchmarkConfig("squad").settings()  # earlier runs' config.json still match
    assert KVBenchmarkConfig("squad", protocol="once").settings()["protocol"] == "once"
