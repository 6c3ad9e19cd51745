"""The head-selection rules of the benchmark's ``heads`` method (issue 35), on hand-made score tables."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.eval.attribution.head_selection import (
    RULES,
    RuleHeads,
    knee,
    layer_outliers,
    outliers,
    top_share,
    z_weighted,
)
from rcattr.eval.attribution.recipes import DEFAULT, selection_ablation
from rcattr.heads import top_heads
from tests.helpers import char_tokenizer, run_attribution


def one_outlier(layers: int = 24, heads: int = 14) -> torch.Tensor:
    """A table where one head stands far out and the rest spread evenly (the held-out model's shape)."""
    scores = torch.linspace(0.40, 0.60, layers * heads, dtype=torch.float64).view(layers, heads)
    scores[15, 7] = 0.99
    return scores


def test_outliers_without_floor_is_the_default_rule():
    scores = one_outlier()
    heads, weights = outliers()(scores)
    assert heads.tolist() == top_heads(scores, "outliers").tolist() == [[15, 7]]
    assert weights.tolist() == [1.0]


def test_floor_raises_a_degenerate_selection_to_a_share_of_the_heads():
    scores = one_outlier()
    heads, _ = outliers(floor=0.05)(scores)
    assert len(heads) == math.ceil(0.05 * 336) == 17
    assert heads[0].tolist() == [15, 7]  # best first
    assert heads.tolist() == top_heads(scores, 17).tolist()


def test_floor_leaves_a_wide_selection_alone():
    scores = torch.zeros(10, 10, dtype=torch.float64)
    scores.view(-1)[:12] = 1.0  # 12 heads stand out, above a 5% floor of 5
    assert len(outliers(floor=0.05)(scores)[0]) == 12


def test_top_share_and_knee():
    scores = torch.tensor([[0.9, 0.85, 0.8, 0.3], [0.29, 0.28, 0.27, 0.26]], dtype=torch.float64)
    assert len(top_share(0.25)(scores)[0]) == 2
    heads, _ = knee(scores)
    assert heads.tolist() == [[0, 0], [0, 1], [0, 2]]  # the drop after the third head


def test_z_weighted_vote_weighs_heads_by_their_distance_above_the_cut():
    scores = torch.tensor([[0.0, 1.0, 2.0, 3.0]], dtype=torch.float64)
    z = (scores.flatten() - 1.5) / scores.flatten().std(correction=0)
    heads, weights = z_weighted(0.0)(scores)
    assert heads.tolist() == [[0, 3], [0, 2]]
    torch.testing.assert_close(weights, z[[3, 2]])
    heads, weights = z_weighted(1.0)(scores)
    assert heads.tolist() == [[0, 3]]
    torch.testing.assert_close(weights, z[[3]] - 1)


def test_z_weighted_vote_on_equal_scores_takes_one_head():
    heads, weights = z_weighted(0.0)(torch.ones(3, 3, dtype=torch.float64))
    assert len(heads) == 1 and weights.tolist() == [1.0]


def test_layer_outliers_ignore_a_layer_that_scores_high_throughout():
    scores = torch.zeros(6, 4, dtype=torch.float64)
    scores[0] = 5.0  # a whole layer high: no head of it stands out within its layer
    scores[3, 2] = 1.0
    assert outliers()(scores)[0][:, 0].unique().tolist() == [0]
    assert layer_outliers()(scores)[0].tolist() == [[3, 2]]


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 16),
    st.integers(0, 2**31 - 1),
)
def test_every_rule_returns_distinct_existing_heads_with_positive_weights(layers, heads, seed):
    scores = torch.rand(layers, heads, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    for name, rule in RULES.items():
        chosen, weights = rule(scores)
        assert chosen.ndim == 2 and chosen.shape[1] == 2 and len(chosen) == len(weights) >= 1, name
        assert bool((chosen[:, 0] < layers).all() and (chosen[:, 1] < heads).all()), name
        assert len({tuple(pair) for pair in chosen.tolist()}) == len(chosen), name
        assert bool((weights > 0).all()), name


def test_selection_ablation_keeps_the_default_row_and_adds_one_row_per_rule():
    recipes = selection_ablation()
    labels = [recipe.label for recipe in recipes]
    assert sum(recipe.lever == DEFAULT for recipe in recipes) == 1
    assert sum(isinstance(recipe.heads, RuleHeads) for recipe in recipes) == len(RULES)
    assert len(set(labels)) == len(labels)


@pytest.mark.parametrize("name", list(RULES))
def test_rule_attributor_uses_its_rule(llama, name):
    model, tokenizer = llama, char_tokenizer()
    recipe = next(
        r for r in selection_ablation() if isinstance(r.heads, RuleHeads) and r.heads.rule is RULES[name]
    )
    attributor = recipe.attributor(model, tokenizer)
    scores = torch.rand(attributor.n_layers, attributor.n_heads, dtype=torch.float64)
    assert attributor.heads.select(scores).heads.tolist() == RULES[name](scores)[0].tolist()


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
    every = methods["default · all heads"]["heads"]
    assert every["min"] == every["max"] == 12  # the tiny Llama's 12 heads, all of them
    assert 1 <= methods[default]["heads"]["min"] <= methods[default]["heads"]["max"] <= 12
    assert set(results["heads"]) == {
        f"attention/{side}/{k}" for side in ("top", "bottom") for k in (1, 2, 5, 10, "all")
    }
    report = (out / "results.md").read_text()
    assert "| recipe | heads per record: mean | fewest | most |" in report and "sweep" not in results
    assert (out / "heads.png").exists() and not (out / "sweep.png").exists()
