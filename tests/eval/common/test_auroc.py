"""The AUROC table (rcattr.eval.common.auroc) against sklearn."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from rcattr.eval.common.auroc import auroc, auroc_table, paired_table
from rcattr.eval.groundedness.claim_report import macro_f1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(-1e6, 1e6), st.booleans()), max_size=60
    )
)
def test_auroc_equals_sklearn_ties_included(items) -> None:
    labels, values = [label for _, label in items], [x for x, _ in items]
    if len(set(labels)) < 2:
        assert np.isnan(auroc(labels, values))
        return
    assert auroc(labels, values) == pytest.approx(roc_auc_score(labels, values), rel=0, abs=1e-15)
    assert auroc(np.array(labels), np.array(values)) == auroc(labels, values)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_auroc_refuses_what_sklearn_refuses(bad: float) -> None:
    with pytest.raises(ValueError, match="NaN or infinity"):
        auroc([0, 1, 1], [0.1, bad, 0.3])
    with pytest.raises(ValueError, match="one length"):
        auroc([0, 1, 1], [0.1, 0.3])


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
