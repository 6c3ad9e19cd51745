"""The pooled and per-source table (rcattr.eval.groundedness.source_report) against direct counts."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score, roc_auc_score

from rcattr.eval.groundedness.source_report import (
    caught,
    falsely_marked,
    markdown,
    source_tables,
)


def _claims(n: int, seed: int):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    kept = [{"source": "A" if i % 3 else "B"} for i in range(n)]
    values = [{"support": float(y + rng.normal(0, 0.8)), "coverage": float(rng.uniform())} for y in labels]
    marks = [{"support": v["support"] < 0.5, "coverage": v["coverage"] < 0.5} for v in values]
    return kept, values, marks, labels


def test_caught_and_falsely_marked_count_the_marks_of_each_label() -> None:
    labels, attributable = np.array([0, 0, 0, 1, 1]), np.array([0, 1, 0, 0, 1])
    assert caught(labels, attributable) == pytest.approx(2 / 3)
    assert falsely_marked(labels, attributable) == pytest.approx(1 / 2)


def test_every_source_and_the_pool_have_each_figure_in_its_interval() -> None:
    kept, values, marks, labels = _claims(90, 0)
    tables = source_tables(kept, values, marks, labels, None, n_boot=200, seed=0)
    assert list(tables) == ["all", "A", "B"] and tables["B"]["claims"] == 30
    for source, entry in tables.items():
        index = [i for i in range(90) if source == "all" or kept[i]["source"] == source]
        y = labels[index]
        for name, v in entry["signals"].items():
            said = np.array([not marks[i][name] for i in index])
            assert v["auroc"] == pytest.approx(roc_auc_score(y, [values[i][name] for i in index]))
            assert v["macro_f1"] == pytest.approx(f1_score(y, said, average="macro"))
            assert v["caught"] == pytest.approx(float((~said[y == 0]).mean()))
            assert v["falsely_marked"] == pytest.approx(float((~said[y == 1]).mean()))
            reference = roc_auc_score(y, [values[i]["support"] for i in index])
            assert v["auroc_minus"] == pytest.approx(v["auroc"] - reference)
            for key in ("auroc", "auroc_minus", "macro_f1", "caught", "falsely_marked"):
                assert v[f"{key}_low"] <= v[key] <= v[f"{key}_high"]
    lines = markdown(tables, cross_validated=("coverage",))
    assert len(lines) == 2 + 3 * 2 and "coverage (cross-validated cut)" in lines[3]


def test_a_source_with_one_label_is_left_out() -> None:
    kept, values, marks, labels = _claims(60, 1)
    labels[[i for i in range(60) if kept[i]["source"] == "B"]] = 1
    assert "B" not in source_tables(kept, values, marks, labels, [str(i // 2) for i in range(60)], 100, 0)
