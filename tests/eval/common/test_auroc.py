"""The AUROC table (rcattr.eval.common.auroc) against sklearn."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from rcattr.eval.common.auroc import auroc_table, paired_table
from rcattr.eval.groundedness.claim_report import macro_f1


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=4, max_size=30))
def test_auroc_table_equals_sklearn_and_its_reference_difference_is_zero(items) -> None:
    labels = [label for _, label in items]
    if len(set(labels)) < 2:
        return
    rows = [{"a": x, "b": -x} for x, _ in items]
    table = auroc_table(rows, labels, "a", groups=[str(i // 2) for i in range(len(items))], n_boot=50)
    assert table["a"]["auroc"] == pytest.approx(roc_auc_score(labels, [x for x, _ in items]))
    assert table["b"]["auroc"] == pytest.approx(1 - table["a"]["auroc"])
    assert table["a"]["minus_a"] == 0 and table["a"]["positives"] == sum(labels)
    assert table["a"]["low"] <= table["a"]["auroc"] + 1e-9 or np.isnan(table["a"]["low"])


def test_paired_table_scores_any_statistic_on_the_same_draws() -> None:
    labels = [1, 1, 0, 0, 1, 0, 1, 0]
    right = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    rows = [{"right": r, "flipped": 1 - r} for r in right]
    table = paired_table(rows, labels, "right", macro_f1, "macro_f1", n_boot=40)
    assert table["right"]["macro_f1"] == 1.0 and table["flipped"]["macro_f1"] == 0.0
    assert table["flipped"]["minus_right"] == -1.0
    assert table["flipped"]["difference_low"] == table["flipped"]["difference_high"] == -1.0
    assert "auroc" not in table["right"]
