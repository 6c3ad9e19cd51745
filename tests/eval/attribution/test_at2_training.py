"""Training AT2's estimators for the benchmark (rcattr.eval.attribution.at2_training): the accuracy table."""

from __future__ import annotations

from rcattr.eval.attribution.at2_training import markdown


def test_the_table_has_a_row_per_training_size_and_a_column_per_dataset() -> None:
    row = {"accuracy": 0.5, "interval": (0.25, 0.75), "n_records": 4}
    table = markdown({"quotesum": {10: row, 100: row}, "verigran": {100: row}})
    lines = table.splitlines()
    assert lines[0] == "| training examples | quotesum | verigran |"
    assert lines[2] == "| 10 | 50.0% [25.0%, 75.0%] (4 records) | — |"
    assert lines[3].startswith("| 100 | 50.0%") and lines[3].count("(4 records)") == 2
