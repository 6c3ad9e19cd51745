"""Head selectors (rcattr.heads.selectors) on a hand-made score table."""

from __future__ import annotations

import pytest
import torch

from rcattr.heads.selectors import FixedHeads, OutlierHeads, TopHeads, heads_for

# 2 layers x 4 heads: one head stands far above the rest
SCORES = torch.tensor([[0.10, 0.20, 0.15, 0.12], [0.11, 0.95, 0.14, 0.13]])


def test_top_heads_rank_the_table() -> None:
    top = TopHeads(2).select(SCORES)
    assert top.as_pairs() == [(1, 1), (0, 1)] and top.kind == "superiority"
    assert top.weights.tolist() == [1.0, 1.0]
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
        heads_for("many")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="OutlierHeads"):
        TopHeads("outliers")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown head_score 'max'"):
        TopHeads(3, "max")  # type: ignore[arg-type]


REACH = torch.tensor([0.3, 1.0], dtype=torch.float64)  # layer 0's window does not reach the whole context


def test_selectors_choose_among_the_heads_that_see_the_whole_context() -> None:
    scores = torch.tensor([[0.90, 0.20, 0.15, 0.12], [0.11, 0.50, 0.14, 0.13]])
    assert TopHeads(2).select(scores).as_pairs() == [(0, 0), (1, 1)]
    assert TopHeads(2).select(scores, REACH).as_pairs() == [(1, 1), (1, 2)]
    assert TopHeads(20).for_model(2, 4).select(scores, REACH).as_pairs() == [(1, 1), (1, 2), (1, 3), (1, 0)]
    assert OutlierHeads().select(scores).as_pairs() == [(0, 0)]
    outliers = OutlierHeads().select(scores, REACH)
    # no head of four stands 2 sd out of its four: the best of layer 1's heads
    assert outliers.as_pairs() == [(1, 1)] and outliers.outliers == 0
    fixed = FixedHeads([(0, 0)]).select(scores, REACH)
    assert fixed.as_pairs() == [(0, 0)] and fixed.seeing == 4  # given heads stay; the selection says who sees


@pytest.mark.parametrize("selector", [TopHeads(3), OutlierHeads(), FixedHeads([(1, 2)])])
def test_where_every_head_sees_the_context_the_selection_is_unchanged(selector) -> None:
    everyone = torch.ones(2, dtype=torch.float64)
    assert torch.equal(selector.select(SCORES, everyone).heads, selector.select(SCORES).heads)
    assert selector.select(SCORES, everyone).seeing == 8
