"""The attribution benchmark runner end to end on a tiny saved model and a tiny QuoteSum-format file."""

from __future__ import annotations

import json

import pytest
from conftest import char_tokenizer, tiny_model

from rcattr.eval.attribution import main

RECORDS = [
    {
        "qid": f"q{i}",
        "unique_id": f"q{i}_0",
        "question": "Who sat?",
        "summary": f"[ 1 The cat sat ] and [ 2 dogs {verb} ].",
        "title1": "Cats",
        "source1": "The cat sat on a mat.",
        "title2": "Dogs",
        "source2": f"Loud dogs {verb} at night.",
        **{f"{field}{slot}": "" for slot in range(3, 9) for field in ("title", "source")},
    }
    for i, verb in enumerate(["bark", "run", "howl"])
]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama")
    tiny_model("llama").save_pretrained(path)
    char_tokenizer().save_pretrained(path)
    return path


@pytest.fixture
def data(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "quotesum"
    folder.mkdir(parents=True)
    (folder / "dev.jsonl").write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
    monkeypatch.setenv("RCATTR_DATA", str(tmp_path / "data"))
    return tmp_path


def _run(saved_model, out, *extra: str) -> dict:
    arguments = ["--dataset", "quotesum", "--model", str(saved_model), "--out", str(out), "--ig-steps", "2"]
    assert main([*arguments, *extra]) == 0
    return json.loads((out / "results.json").read_text())


def test_every_method_runs_and_writes_the_report(saved_model, data, capsys) -> None:
    out = data / "run"
    results = _run(saved_model, out, "--faithfulness", "2", "--lds-samples", "4", "--method-limit", "ig=1")
    methods = results["methods"]
    for name in ("rc", "attention", "hidden_state", "ig", "bm25", "ablation", "random"):
        assert 0.0 <= methods[name]["accuracy"] <= 1.0
        assert methods[name]["seconds_per_example"] > 0 or name in ("bm25", "random")
    assert methods["rc"]["n_spans"] == 6 and methods["ig"]["n_records"] == 1
    assert "attention · RC bottom-12 heads" in methods and methods["attention · all heads"]["from"] == "sweep"
    # the default RCAttributor is the sweep's top-k attention row, computed separately
    assert methods["rc"]["accuracy"] == methods["attention · RC top-12 heads"]["accuracy"]
    assert methods["rc"]["rc_default_same_records"] == methods["rc"]["accuracy"]
    assert 0.0 <= methods["ig"]["rc_default_same_records"] <= 1.0  # ig ran on 1 record: RC on that one
    assert set(results["sweep"]) >= {"attention/top/1", "attention/bottom/all", "rc/top/10"}
    assert results["faithfulness"]["bm25"]["n_records"] == 2
    assert results["faithfulness"]["ig"]["n_records"] == 1  # ig ran on one record only
    table = (out / "results.md").read_text()
    assert "| bm25 |" in table and "teacher-forced" in table and "ig: first 1 records only" in table
    assert (out / "sweep.png").stat().st_size > 0
    assert "| rc |" in capsys.readouterr().out


def test_bm25_accuracy_is_exact_on_a_lexical_case(saved_model, data) -> None:
    results = _run(saved_model, data / "bm25", "--methods", "bm25")
    assert results["methods"]["bm25"]["accuracy"] == 1.0  # each span shares its words with one source only
    assert results["methods"]["bm25"]["location_accuracy"] == 1.0


def test_resumes_without_recomputing_and_refuses_other_settings(saved_model, data) -> None:
    out = data / "resume"
    _run(saved_model, out, "--methods", "random", "--limit", "2")
    lines = (out / "records" / "random.jsonl").read_text().splitlines()
    results = _run(saved_model, out, "--methods", "random")  # one more record, the first two kept
    assert (out / "records" / "random.jsonl").read_text().splitlines()[:2] == lines
    assert results["methods"]["random"]["n_records"] == 3
    later = _run(saved_model, out, "--methods", "bm25")  # the report keeps every method on disk
    assert set(later["methods"]) == {"bm25", "random"}
    with pytest.raises(ValueError, match="top_k"):
        _run(saved_model, out, "--methods", "random", "--top-k", "5")


def test_cli_rejects_unknown_methods(saved_model, data) -> None:
    with pytest.raises(SystemExit, match="unknown method"):
        main(["--dataset", "quotesum", "--out", str(data / "x"), "--methods", "rc,magic"])
    assert not (data / "x").exists()  # refused before anything is written
