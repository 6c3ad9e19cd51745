"""The citation benchmark (rcattr.eval.citations.benchmark): a run on a tiny model, its report from the rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rcattr.eval.citations.cli import main
from rcattr.eval.common.datasets import load_quotesum
from tests.helpers import data_folder


def _quotesum_line(i: int) -> dict:
    return {
        "qid": f"q{i}",
        "unique_id": f"q{i}_0",
        "question": f"Who sat, {i}?",
        "summary": f"[ 1 The cat sat ] here. Then [ 2 dogs ran {i} ] away.",
        "title1": "Cats",
        "source1": "The cat sat on a mat.",
        "title2": "Dogs",
        "source2": f"Loud dogs ran {i} times.",
        **{f"{field}{slot}": "" for slot in range(3, 9) for field in ("title", "source")},
    }


@pytest.mark.slow
def test_a_run_writes_every_sentence_and_its_report_comes_back_from_the_rows(
    monkeypatch, saved_llama, tmp_path
) -> None:
    data_folder(
        tmp_path,
        monkeypatch,
        "quotesum/dev.jsonl",
        "".join(json.dumps(_quotesum_line(i)) + "\n" for i in range(6)),
    )
    out = tmp_path / "run"
    common = ["--datasets", "quotesum", "--out", str(out), "--model", str(saved_llama)]
    main(common)
    lines = [
        json.loads(line) for line in (out / "records" / "sentences-quotesum.jsonl").read_text().splitlines()
    ]
    records = load_quotesum()
    assert [line["id"] for line in lines] == [record.id for record in records]
    for line in lines:
        assert [s["gold"] for s in line["sentences"]] == [[0], [1]]
        assert all(np.isclose(sum(s["shares"]), 1, atol=1e-4) for s in line["sentences"])
    appended = [
        json.loads(line) for line in (out / "records" / "appended-quotesum.jsonl").read_text().splitlines()
    ]
    assert all(len(line["sentences"]) == 1 and line["sentences"][0]["gold"] == [] for line in appended)
    for line in lines + appended:
        for sentence in line["sentences"]:
            assert sentence["status"] in ("supported", "weak", "unsupported") and 0 <= sentence["vouch"] <= 1
            assert {"claims", "coverage", "logprob", "neg_entropy", "lookback"} <= set(sentence)
    results = json.loads((out / "results.json").read_text())
    assert results["appended"]["quotesum"]["appended"]["sentences"] == len(appended)
    assert results["tables"]["quotesum/dev"]["foreign"] == results["tables"]["quotesum/dev"]["records"]
    (out / "results.json").unlink()
    monkeypatch.setattr(
        "rcattr.runtime.models.load_model", lambda *args, **kwargs: pytest.fail("the model was loaded")
    )
    main([*common, "--report-only"])
    assert json.loads((out / "results.json").read_text()) == results
