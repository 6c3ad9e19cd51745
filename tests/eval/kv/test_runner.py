"""The KV benchmark runner end to end on a tiny saved model and a tiny SQuAD-format file."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass

import pytest
import torch

from rcattr.eval.kv import KVBenchmark, KVBenchmarkConfig, default_kv_methods, main
from rcattr.eval.kv.methods import (
    PRESSES,
    KVMethod,
    PressMethod,
    RCMethod,
    import_kvpress,
    rc_options,
    rc_policy,
)
from rcattr.eval.kv.protocol import greedy_answer, split_prompt
from rcattr.eval.kv.registry import KVFamily
from rcattr.eval.kv.results import summarise
from rcattr.eval.kv.scorers import AblationScorer
from rcattr.eval.kv.tables import markdown_table
from rcattr.kvcache import RCKVCache
from rcattr.models import load_model
from tests.helpers import (
    PARAGRAPHS,
    SQUAD,
    char_tokenizer,
    data_folder,
    save_tiny,
    tiny_model,
    wide_llama,
    without_timings,
)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    return save_tiny(wide_llama(), tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def data(tmp_path, monkeypatch):
    return data_folder(tmp_path, monkeypatch, "squad_v2/dev-v2.0.json", json.dumps(SQUAD))


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


def _row(method: str, setting: dict, record: str, ver: float, compression: float, match: float) -> dict:
    name = "rc" if "c" in setting else method.split("/")[0]
    return {
        "method": method,
        "name": name,
        "setting": setting,
        "id": record,
        "ver": ver,
        "rouge1": 0.0,
        "rougeL": 0.0,
        "match": match,
        "compression_ratio": compression,
        "bytes_ratio": 1 - compression,
        "seconds": 1.0,
    }


def test_matched_differences_interpolate_each_record_and_pair_the_records() -> None:
    rows = []
    for i in range(30):
        record, hard = f"q{i}", (i % 5) / 10  # records differ; the methods' gaps do not
        rows += [
            _row("press/r=0.4", {"ratio": 0.4}, record, 0.2 + hard, 0.4, 1.0),
            _row("press/r=0.8", {"ratio": 0.8}, record, 0.6 + hard, 0.8, 0.0),
            _row("rc/c=1/w=16", {"c": 1.0, "window": 16}, record, 0.3 + hard, 0.5, 1.0),
            _row("rc/c=2/w=16", {"c": 2.0, "window": 16}, record, 0.5 + hard, 0.7, 1.0),
            _row(
                "rc/c=1/w=16/sinks=4",
                {"c": 1.0, "window": 16, "variant": "sinks=4"},
                record,
                0.2 + hard,
                0.4,
                1.0,
            ),
            _row(
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


def test_the_default_variant_is_rckvcaches_defaults() -> None:
    default = RCKVCache(tiny_model("llama"))
    assert rc_policy(KVBenchmarkConfig("squad").rc_variants[0], c=1.0) == default.policy
    assert rc_options("paper") == {
        "statistic": "expected",
        "value_norm": False,
        "sinks": 0,
        "scope": "head",
    }
    assert rc_policy("paper", c=0.7) == RCKVCache.paper(tiny_model("llama"), c=0.7).policy
    assert isinstance(rc_policy("upper_bound").scorer, AblationScorer)


@dataclass(frozen=True)
class NarrowWindow(KVFamily):
    """RCKVCache with the paper's recipe and a window of 4 tokens, at every c of the config."""

    name: str = "rc_w4"

    def settings(self, config: KVBenchmarkConfig) -> list[KVMethod]:
        return [RCMethod(c, 4) for c in config.c]


def test_a_registered_method_runs_through_the_same_protocol(saved_model, data) -> None:
    methods = default_kv_methods()
    methods.add(NarrowWindow())
    with pytest.raises(ValueError, match="built-in or reserved"):
        methods.add(NarrowWindow("full"))
    assert "rc_w4" not in default_kv_methods()  # each registry is its own: no module state changed
    model, tokenizer = load_model(str(saved_model))
    config = KVBenchmarkConfig("squad", methods=("rc_w4",), c=(0.5, 1.0), max_new_tokens=4)
    results = KVBenchmark(config, model, tokenizer, data / "own", methods=methods).run()
    assert list(results["methods"]) == ["full", "rc/c=0.5/w=4", "rc/c=1/w=4"]
    assert results["methods"]["rc/c=1/w=4"]["n_records"] == 2 and "| rc | c = 1, w = 4 |" in markdown_table(
        results
    )
    with pytest.raises(ValueError, match="unknown method"):  # the default registry has no rc_w4
        KVBenchmark(config, model, tokenizer, data / "x")
    assert not (data / "x").exists()


def test_unknown_methods_and_a_missing_kvpress_are_clear_errors(data, monkeypatch) -> None:
    with pytest.raises(SystemExit, match="unknown method.*choose from rc, snapkv"):
        main(["--dataset", "squad", "--out", str(data / "x"), "--methods", "rc,h2o"])
    monkeypatch.setitem(sys.modules, "kvpress", None)  # import kvpress now fails
    with pytest.raises(ImportError, match="make setup-kvpress"):
        import_kvpress()
    with pytest.raises(SystemExit, match="kvpress is not installed"):
        main(["--dataset", "squad", "--out", str(data / "x"), "--methods", "snapkv"])


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


@pytest.mark.kvpress
def test_observed_attention_runs_eager_and_gives_the_model_its_attention_back() -> None:
    model, tokenizer = wide_llama(), char_tokenizer()
    implementation = model.config._attn_implementation
    prompt = split_prompt(tokenizer, PARAGRAPHS[1], "Where is Paris?")
    cache = PressMethod("observed_attention", 0.5).prefill(model, prompt.context_ids)
    assert cache.layers[0].keys.shape[2] == prompt.n_context // 2
    assert model.config._attn_implementation == implementation


@pytest.mark.kvpress
@pytest.mark.parametrize("name", ["snapkv", "knorm", "adakv_snapkv"])
def test_press_answers_equal_kvpress_pipeline(name) -> None:
    from kvpress.pipeline import KVPressTextGenerationPipeline

    model, tokenizer = wide_llama(), char_tokenizer()
    prompt = split_prompt(tokenizer, PARAGRAPHS[1], "Where is Paris?")
    method = PressMethod(name, 0.5)
    ours = greedy_answer(model, method.prefill(model, prompt.context_ids), prompt, max_new_tokens=8)
    pipeline = KVPressTextGenerationPipeline(model=model, tokenizer=tokenizer)
    with torch.no_grad():
        theirs = pipeline._forward(
            {"context_ids": prompt.context_ids, "questions_ids": [prompt.question_ids]},
            max_new_tokens=8,
            press=PRESSES[name](import_kvpress(), 0.5),
        )
    assert [tokenizer.decode(ours, skip_special_tokens=True)] == theirs


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
