"""Head selectors (rcattr.selectors) on a hand-made score table."""

from __future__ import annotations

import pytest
import torch

from rcattr.selectors import BottomHeads, FixedHeads, OutlierHeads, TopHeads, heads_for

# 2 layers x 4 heads: one head stands far above the rest
SCORES = torch.tensor([[0.10, 0.20, 0.15, 0.12], [0.11, 0.95, 0.14, 0.13]])


def test_top_and_bottom_heads_rank_the_table() -> None:
    top = TopHeads(2).select(SCORES)
    assert top.as_pairs() == [(1, 1), (0, 1)] and top.kind == "superiority"
    assert top.weights.tolist() == [1.0, 1.0]
    assert BottomHeads(2).select(SCORES).as_pairs() == [(0, 0), (1, 0)]
    assert len(TopHeads(0.5).select(SCORES).heads) == 4  # a fraction of all heads


def test_the_outlier_rule_takes_the_standing_out_head() -> None:
    selection = OutlierHeads().select(SCORES)
    assert selection.as_pairs() == [(1, 1)] and selection.outliers == 1


def test_fixed_heads_ignore_the_scores() -> None:
    selection = FixedHeads([(0, 3), (1, 0)]).select(SCORES)
    assert selection.as_pairs() == [(0, 3), (1, 0)] and selection.kind == "fixed"
    with pytest.raises(ValueError, match="does not exist"):
        FixedHeads([(2, 0)]).for_model(2, 4)


def test_a_count_above_the_models_heads_is_capped_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="top_k=20 but the model has 8 heads"):
        assert TopHeads(20).for_model(2, 4) == TopHeads(8)
    assert TopHeads(3).for_model(2, 4) == TopHeads(3)


def test_heads_for_reads_the_command_lines_top_k() -> None:
    assert heads_for("outliers", "rc") == OutlierHeads("rc")
    assert heads_for(5) == TopHeads(5)
    with pytest.raises(ValueError, match="top_k='many'"):
        heads_for("many")
    with pytest.raises(ValueError, match="unknown head_score 'max'"):
        TopHeads(3, "max")  # type: ignore[arg-type]
