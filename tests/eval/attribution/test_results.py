"""The attribution benchmark's summary (rcattr.eval.attribution.results): the paper's reference pairs every method."""

from __future__ import annotations

import pytest

from rcattr.eval.attribution.recipes import ablation
from tests.helpers import run_attribution


def test_a_reference_run_on_fewer_records_gives_way_to_its_sweep_row(saved_llama, quotesum_data) -> None:
    results = run_attribution(
        saved_llama,
        quotesum_data / "subset",
        "--methods",
        "rc_paper,sweep,bm25",
        "--method-limit",
        "rc_paper=1",
    )
    methods = results["methods"]
    paper = next(recipe.label for recipe in ablation() if recipe.lever == "paper")
    assert methods["rc_paper"]["n_records"] == 1 and methods[paper]["n_records"] == 3
    assert results["paper_reference"] == paper  # pairs bm25 on all 3 records, not on rc_paper's one
    assert methods["bm25"]["difference_to_paper"] == pytest.approx(
        methods["bm25"]["accuracy"] - methods[paper]["accuracy"]
    )
