"""The head-selection rules of the benchmark's ``heads`` method (issue 35) and the paper's bottom heads, on
hand-made score tables."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr import RCAttributor
from rcattr.eval.attribution.recipes import DEFAULT, ablation, selection_ablation
from rcattr.eval.attribution.selection_rules import (
    RULES,
    BottomHeads,
    KneeHeads,
    LayerCentredHeads,
    OutlierFloorHeads,
    SelectionRule,
    ShareHeads,
    ZWeightedHeads,
)
from rcattr.heads.scores import outlier_heads, top_heads
from rcattr.heads.selectors import OutlierHeads, TopHeads
from tests.helpers import char_tokenizer, run_attribution
from tests.helpers.attribution import ANSWER, INPUT


def one_outlier(layers: int = 24, heads: int = 14) -> torch.Tensor:
    """A table where one head stands far out and the rest spread evenly (the held-out model's shape)."""
    scores = torch.linspace(0.40, 0.60, layers * heads, dtype=torch.float64).view(layers, heads)
    scores[15, 7] = 0.99
    return scores


def test_outliers_without_floor_is_the_default_rule():
    scores = one_outlier()
    selection = OutlierFloorHeads().select(scores)
    assert selection.heads.tolist() == OutlierHeads().select(scores).heads.tolist() == [[15, 7]]
    assert selection.weights.tolist() == [1.0] and selection.kind == "superiority"
    assert selection.outliers is selection.minimum is selection.reach is None  # as the rules always gave


def test_rules_choose_among_all_heads_whatever_the_reach():
    scores = one_outlier()
    reach = torch.ones(24, dtype=torch.float64)
    reach[15] = 0.5  # the outlier's layer does not see the whole context
    for rule in RULES.values():
        assert torch.equal(rule.select(scores, reach).heads, rule.select(scores).heads)
    assert OutlierFloorHeads().select(scores, reach).heads.tolist() == [[15, 7]]
    assert OutlierHeads().select(scores, reach).heads.tolist() != [[15, 7]]


def test_floor_raises_a_degenerate_selection_to_a_share_of_the_heads():
    scores = one_outlier()
    heads, _ = OutlierFloorHeads(floor=0.05).choose(scores)
    assert len(heads) == math.ceil(0.05 * 336) == 17
    assert heads[0].tolist() == [15, 7]  # best first
    assert heads.tolist() == top_heads(scores, 17).tolist()


def test_floor_leaves_a_wide_selection_alone():
    scores = torch.zeros(10, 10, dtype=torch.float64)
    scores.view(-1)[:12] = 1.0  # 12 heads stand out, above a 5% floor of 5
    assert len(OutlierFloorHeads(floor=0.05).choose(scores)[0]) == 12
    assert OutlierFloorHeads(floor=0.05).choose(scores)[0].tolist() == outlier_heads(scores).tolist()


def test_top_share_and_knee():
    scores = torch.tensor([[0.9, 0.85, 0.8, 0.3], [0.29, 0.28, 0.27, 0.26]], dtype=torch.float64)
    assert len(ShareHeads(0.25).choose(scores)[0]) == 2
    heads, _ = KneeHeads().choose(scores)
    assert heads.tolist() == [[0, 0], [0, 1], [0, 2]]  # the drop after the third head


def test_z_weighted_vote_weighs_heads_by_their_distance_above_the_cut():
    scores = torch.tensor([[0.0, 1.0, 2.0, 3.0]], dtype=torch.float64)
    z = (scores.flatten() - 1.5) / scores.flatten().std(correction=0)
    heads, weights = ZWeightedHeads(0.0).choose(scores)
    assert heads.tolist() == [[0, 3], [0, 2]]
    torch.testing.assert_close(weights, z[[3, 2]])
    heads, weights = ZWeightedHeads(1.0).choose(scores)
    assert heads.tolist() == [[0, 3]]
    torch.testing.assert_close(weights, z[[3]] - 1)


def test_z_weighted_vote_on_equal_scores_takes_one_head():
    heads, weights = ZWeightedHeads(0.0).choose(torch.ones(3, 3, dtype=torch.float64))
    assert len(heads) == 1 and weights.tolist() == [1.0]


def test_layer_outliers_ignore_a_layer_that_scores_high_throughout():
    scores = torch.zeros(6, 4, dtype=torch.float64)
    scores[0] = 5.0  # a whole layer high: no head of it stands out within its layer
    scores[3, 2] = 1.0
    assert OutlierFloorHeads().choose(scores)[0][:, 0].unique().tolist() == [0]
    assert LayerCentredHeads().choose(scores)[0].tolist() == [[3, 2]]


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 16),
    st.integers(0, 2**31 - 1),
)
def test_every_rule_returns_distinct_existing_heads_with_positive_weights(layers, heads, seed):
    scores = torch.rand(layers, heads, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    for name, rule in RULES.items():
        chosen, weights = rule.choose(scores)
        assert chosen.ndim == 2 and chosen.shape[1] == 2 and len(chosen) == len(weights) >= 1, name
        assert bool((chosen[:, 0] < layers).all() and (chosen[:, 1] < heads).all()), name
        assert len({tuple(pair) for pair in chosen.tolist()}) == len(chosen), name
        assert bool((weights > 0).all()), name


def test_selection_ablation_keeps_the_default_row_and_adds_one_row_per_rule():
    recipes = selection_ablation()
    labels = [recipe.label for recipe in recipes]
    assert sum(recipe.lever == DEFAULT for recipe in recipes) == 1
    assert sum(isinstance(recipe.heads, SelectionRule) for recipe in recipes) == len(RULES)
    assert len(set(labels)) == len(labels)


@pytest.mark.parametrize("name", list(RULES))
def test_rule_attributor_uses_its_rule(llama, name):
    model, tokenizer = llama, char_tokenizer()
    recipe = next(r for r in selection_ablation() if r.heads is RULES[name])
    attributor = recipe.attributor(model, tokenizer)
    scores = torch.rand(attributor.n_layers, attributor.n_heads, dtype=torch.float64)
    assert attributor.heads.select(scores).heads.tolist() == RULES[name].choose(scores)[0].tolist()


def test_heads_method_scores_every_selection_rule_and_counts_their_heads(saved_llama, quotesum_data) -> None:
    from rcattr.eval.attribution.recipes import selection_ablation

    out = quotesum_data / "heads"
    results = run_attribution(saved_llama, out, "--methods", "heads,rc,bm25")
    methods = results["methods"]
    rows = [recipe.label for recipe in selection_ablation()]
    assert set(rows) <= set(methods) and all(methods[row]["from"] == "heads" for row in rows)
    # the heads pass's default row is the default attributor run on its own
    default = next(recipe.label for recipe in selection_ablation() if recipe.lever == "default")
    assert methods[default]["accuracy"] == methods["rc"]["accuracy"]
    every = methods["heads' vote · all heads"]["heads"]
    assert every["min"] == every["max"] == 12  # the tiny Llama's 12 heads, all of them
    assert 1 <= methods[default]["heads"]["min"] <= methods[default]["heads"]["max"] <= 12
    assert set(results["heads"]) == {
        f"attention/{side}/{k}" for side in ("top", "bottom") for k in (1, 2, 5, 10, "all")
    }
    report = (out / "results.md").read_text()
    assert "| recipe | heads per record: mean | fewest | most |" in report and "sweep" not in results
    assert (out / "heads.png").exists() and not (out / "sweep.png").exists()


# 2 layers x 4 heads: one head stands far above the rest
SCORES = torch.tensor([[0.10, 0.20, 0.15, 0.12], [0.11, 0.95, 0.14, 0.13]])
REACH = torch.tensor([0.3, 1.0], dtype=torch.float64)  # layer 0's window does not reach the whole context


def test_bottom_heads_rank_the_table_from_the_bottom():
    bottom = BottomHeads(2).select(SCORES)
    assert bottom.as_pairs() == [(0, 0), (1, 0)] and bottom.kind == "superiority" and bottom.weights is None
    assert len(BottomHeads(0.5).select(SCORES).heads) == 4  # a fraction of all heads
    assert BottomHeads(1).select(SCORES, REACH).as_pairs() == [(1, 0)]  # among the heads that see
    everyone = torch.ones(2, dtype=torch.float64)
    assert torch.equal(BottomHeads(2).select(SCORES, everyone).heads, BottomHeads(2).select(SCORES).heads)


def test_bottom_heads_as_many_as_a_selectors():
    assert BottomHeads(OutlierHeads()).select(SCORES).as_pairs() == [(0, 0)]  # one outlier: one head
    scores = torch.zeros(4, 6)
    scores[1, 2], scores[3, 0] = 5.0, 4.0  # two outliers
    assert len(BottomHeads(OutlierHeads()).select(scores).heads) == 2
    assert BottomHeads(TopHeads(3)).select(SCORES).as_pairs() == BottomHeads(3).select(SCORES).as_pairs()
    # the ablation's "bottom heads" row takes as many as the default's heads
    rows = {recipe.label: recipe.heads for recipe in ablation()}
    assert rows["heads' vote · bottom heads"] == BottomHeads(OutlierHeads())
    assert {recipe.label: recipe.heads for recipe in ablation(5)}[
        "heads' vote · bottom heads"
    ] == BottomHeads(TopHeads(5))


def test_bottom_heads_check_their_count_against_the_model():
    with pytest.warns(UserWarning, match="top_k=20 but the model has 8 heads"):
        assert BottomHeads(20).for_model(2, 4) == BottomHeads(8)
    assert BottomHeads(3).for_model(2, 4) == BottomHeads(3)
    with pytest.warns(UserWarning, match="top_k=20 but the model has 8 heads"):
        assert BottomHeads(TopHeads(20)).for_model(2, 4) == BottomHeads(TopHeads(8))
    with pytest.raises(ValueError, match="must be in"):
        BottomHeads(1.5).for_model(2, 4)
    with pytest.raises(ValueError, match="k='outliers'"):
        BottomHeads("outliers")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown head_score"):
        BottomHeads(2, "max")  # type: ignore[arg-type]


def test_the_attributor_votes_with_the_bottom_heads(llama):
    tokenizer = char_tokenizer()
    scores = RCAttributor(llama, tokenizer, TopHeads(4)).head_scores(INPUT, ANSWER)
    bottom = RCAttributor(llama, tokenizer, BottomHeads(2)).attribute(INPUT, ANSWER)
    assert bottom.head_selection.heads.tolist() == [
        [int(i) // scores.shape[1], int(i) % scores.shape[1]] for i in scores.flatten().argsort()[:2]
    ]
