"""The attribution benchmark's report (rcattr.eval.attribution.report): a row per method, notes to trust it."""

from __future__ import annotations

from rcattr.eval.attribution.report import markdown_table


def _row(accuracy: float, records: int, **extra) -> dict:
    return {
        "accuracy": accuracy,
        "interval": (accuracy - 0.1, accuracy + 0.1),
        "n_spans": 6,
        "n_records": records,
        "seconds_per_example": 0.5,
        "peak_memory_mib": 100.0,
        **extra,
    }


RESULTS = {
    "config": {"dataset": "quotesum", "split": "dev", "granularity": "chunk", "max_tokens": 4096},
    "model": "tiny",
    "protocol": "p",
    "reference": "rc",
    "paper_reference": None,
    "n_records": 3,
    "skipped_too_long": 0,
    "methods": {
        "rc": _row(0.5, 3),
        "bm25": _row(0.7, 2, difference_to_default=0.2, difference_to_default_interval=(0.1, 0.3)),
    },
}


def test_each_method_has_its_row_against_the_default() -> None:
    table = markdown_table(RESULTS)
    assert table.startswith("## quotesum dev: chunk-level attribution accuracy")
    assert "| rc | 50.0% [40.0%, 60.0%] | reference |" in table
    assert "| bm25 | 70.0% [60.0%, 80.0%] | +20.0% [+10.0%, +30.0%] |" in table


def test_the_notes_say_what_ran_on_fewer_records() -> None:
    table = markdown_table(RESULTS)
    assert "Differences are paired" in table and "against `rc` (the default RCAttributor)." in table
    assert "bm25: first 2 records only" in table and "rc: first" not in table
