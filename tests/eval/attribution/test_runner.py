"""The attribution benchmark runner end to end on a tiny saved model and a tiny QuoteSum-format file."""

from __future__ import annotations

import json

import pytest
import torch

from rcattr.eval.attribution.recipes import ablation
from rcattr.runtime.models import load_model
from tests.helpers import run_attribution, without_timings


@pytest.mark.usefixtures("unchanged_process_state")
def test_every_method_runs_and_writes_the_report(saved_llama, quotesum_data, capsys) -> None:
    out = quotesum_data / "run"
    results = run_attribution(
        saved_llama, out, "--faithfulness", "2", "--lds-samples", "4", "--method-limit", "ig=1"
    )
    methods = results["methods"]
    for name in ("rc", "rc_paper", "attention", "hidden_state", "ig", "bm25", "ablation", "random"):
        assert 0.0 <= methods[name]["accuracy"] <= 1.0
        assert methods[name]["seconds_per_example"] > 0 or name in ("bm25", "random")
    assert methods["rc"]["n_spans"] == 6 and methods["ig"]["n_records"] == 1
    recipes = {recipe.label: recipe for recipe in ablation()}
    assert set(recipes) <= set(methods) and methods["paper · bottom-20 heads"]["from"] == "sweep"
    # the standalone default and paper attributors are the sweep's default and paper rows, computed separately
    default, paper = (
        next(label for label, r in recipes.items() if r.lever == lever) for lever in ("default", "paper")
    )
    for method, row in (("rc", default), ("rc_paper", paper)):
        assert methods[method]["accuracy"] == methods[row]["accuracy"]
        assert methods[method]["interval"] == methods[row]["interval"]
    assert methods["rc"]["rc_default_same_records"] == methods["rc"]["accuracy"]
    assert results["reference"] == "rc" and methods["rc"]["difference_to_default"] == 0.0
    assert results["paper_reference"] == "rc_paper" and methods["rc_paper"]["difference_to_paper"] == 0.0
    low, high = methods["bm25"]["interval"]
    assert low <= methods["bm25"]["accuracy"] <= high
    for reference in ("default", "paper"):
        low, high = methods["bm25"][f"difference_to_{reference}_interval"]
        assert low <= methods["bm25"][f"difference_to_{reference}"] <= high
    assert 0.0 <= methods["ig"]["rc_default_same_records"] <= 1.0  # ig ran on 1 record: RC on that one
    assert set(results["sweep"]) >= {"attention/top/1", "attention/bottom/all", "rc/top/10"}
    assert results["faithfulness"]["bm25"]["n_records"] == 2
    assert results["faithfulness"]["ig"]["n_records"] == 1  # ig ran on one record only
    table = (out / "results.md").read_text()
    assert "| bm25 |" in table and "teacher-forced" in table and "ig: first 1 records only" in table
    assert "| − paper (paired 95% CI) |" in table
    assert (out / "sweep.png").stat().st_size > 0
    assert "| rc |" in capsys.readouterr().out


def test_bm25_accuracy_is_exact_on_a_lexical_case(saved_llama, quotesum_data) -> None:
    results = run_attribution(saved_llama, quotesum_data / "bm25", "--methods", "bm25")
    assert results["methods"]["bm25"]["accuracy"] == 1.0  # each span shares its words with one source only
    assert results["methods"]["bm25"]["location_accuracy"] == 1.0


def test_resumes_without_recomputing_and_refuses_other_settings(saved_llama, quotesum_data) -> None:
    out = quotesum_data / "resume"
    run_attribution(saved_llama, out, "--methods", "random", "--limit", "2")
    lines = (out / "records" / "random.jsonl").read_text().splitlines()
    results = run_attribution(saved_llama, out, "--methods", "random")  # one more record, the first two kept
    assert (out / "records" / "random.jsonl").read_text().splitlines()[:2] == lines
    assert results["methods"]["random"]["n_records"] == 3
    later = run_attribution(saved_llama, out, "--methods", "bm25")  # the report keeps every method on disk
    assert set(later["methods"]) == {"bm25", "random"}
    with pytest.raises(SystemExit, match="top_k"):
        run_attribution(saved_llama, out, "--methods", "random", "--top-k", "5")


def test_a_batched_run_writes_the_rows_of_a_run_one_record_at_a_time(saved_llama, quotesum_data) -> None:
    methods = ("rc", "attention", "bm25", "random")  # two batched in one forward, two one by one

    def rows(run: str, method: str) -> list[dict]:
        lines = (quotesum_data / run / "records" / f"{method}.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    run_attribution(saved_llama, quotesum_data / "one", "--methods", ",".join(methods))
    run_attribution(saved_llama, quotesum_data / "two", "--methods", ",".join(methods), "--batch-size", "2")
    for method in methods:
        one, two = rows("one", method), rows("two", method)
        assert all(row["seconds"] >= 0 for row in two)
        # the rows of a batch share its time: records 1 and 2 ran together, record 3 alone
        assert two[0]["seconds"] == two[1]["seconds"]
        scores = [[row.pop("chunk_scores") for row in run] for run in (one, two)]
        assert without_timings(two) == without_timings(one)
        torch.testing.assert_close(torch.tensor(scores[1]), torch.tensor(scores[0]), atol=1e-5, rtol=0)
    before = (quotesum_data / "two" / "records" / "rc.jsonl").read_text()
    run_attribution(
        saved_llama, quotesum_data / "two", "--methods", "rc", "--batch-size", "3"
    )  # resumes: nothing to redo
    assert (quotesum_data / "two" / "records" / "rc.jsonl").read_text() == before


def test_the_peers_run_beside_rc_with_faithfulness_intervals(saved_llama, quotesum_data, tmp_path) -> None:
    from rcattr.baselines.at2 import train_estimator
    from rcattr.text.prompting import ContextInput

    model, tokenizer = load_model(str(saved_llama))
    inputs = [ContextInput(["One fact. Another.", "A third."], f"Question {i}?") for i in range(2)]
    train_estimator(model, tokenizer, inputs, tmp_path / "at2", num_masks=4, num_iterations=3)
    estimator = tmp_path / "at2" / "estimators" / "n2" / "score_estimator.pt"
    out = quotesum_data / "peers"
    methods = "rc,shapley,kernel_shap,context_cite,at2"
    extra = [
        "--methods",
        methods,
        "--at2-estimator",
        str(estimator),
        "--faithfulness",
        "2",
        "--lds-samples",
        "4",
    ]
    results = run_attribution(saved_llama, out, *extra)
    for name in methods.split(","):
        assert 0.0 <= results["methods"][name]["accuracy"] <= 1.0
        faithful = results["faithfulness"][name]
        assert faithful["n_records"] == 2
        low, high = faithful["drop@1_interval"]
        assert low <= faithful["drop@1"] <= high
        if name != "rc":  # each against the default on the same records
            low, high = faithful["drop@1_minus_reference_interval"]
            assert low <= faithful["drop@1_minus_reference"] <= high
    assert "drop@1_minus_reference" not in results["faithfulness"]["rc"]
    table = (out / "results.md").read_text()
    assert "| context_cite |" in table and "paired difference to `rc`" in table


def test_skip_runs_the_records_after_the_first_lines(saved_llama, quotesum_data) -> None:
    def ids(run: str, *extra: str) -> list[str]:
        run_attribution(saved_llama, quotesum_data / run, "--methods", "random", *extra)
        lines = (quotesum_data / run / "records" / "random.jsonl").read_text().splitlines()
        return [json.loads(line)["id"] for line in lines]

    every = ids("every")
    assert len(every) == 3
    assert ids("held_out", "--skip", "1", "--limit", "1") == every[1:2]
    assert ids("rest", "--skip", "1") == every[1:]
    assert "first 1 lines were left out (`--skip`)" in (quotesum_data / "rest" / "results.md").read_text()
    assert "`--skip`" not in (quotesum_data / "every" / "results.md").read_text()
