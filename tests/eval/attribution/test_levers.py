"""The ablation's experimental levers (:mod:`rcattr.eval.attribution.levers`) against brute force."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.eval.attribution.levers import LeverScorer, PriorBlock, margin_weights, unit_head_scores
from rcattr.eval.attribution.recipes import Recipe
from rcattr.heads.scores import layer_rc
from rcattr.heads.selectors import TopHeads
from tests.helpers.blocks import answer_block, random_layer
from tests.reference.spans import brute_mass

pytestmark = pytest.mark.transformers_line


def test_per_unit_head_scores_match_brute_force() -> None:
    cross, cross_visible, own, own_visible = random_layer()
    stats = layer_rc(cross, cross_visible, own, own_visible)
    membership = torch.tensor(
        [[True, True, False, False], [False, False, True, True], [False, True, True, False]]
    )
    per_unit = unit_head_scores(stats, membership)
    for unit, rows in enumerate(membership.tolist()):
        for head in range(3):
            y = own[head][own_visible].tolist()  # the answer's Y(g, g), as for the whole-answer score
            x = [
                float(cross[head, r, c])
                for r, keep in enumerate(rows)
                if keep
                for c in range(5)
                if cross_visible[r, c]
            ]
            superiority = sum(a > b for a in x for b in y) / (len(x) * len(y))
            rc = sum(max(a - b, 0) for a in x for b in y) / (len(x) * len(y))
            spread = torch.tensor(y, dtype=torch.float64).std(correction=0).item()
            assert per_unit["superiority"][unit, head].item() == pytest.approx(superiority, rel=1e-9)
            assert per_unit["rc"][unit, head].item() == pytest.approx(rc, rel=1e-9)
            assert per_unit["rc_std"][unit, head].item() == pytest.approx(rc / spread, rel=1e-9)
    # every row at once is the whole answer's score
    whole = unit_head_scores(stats, torch.ones(1, 4, dtype=torch.bool))
    for kind, score in stats.every_score.items():
        torch.testing.assert_close(whole[kind][0], score)


@given(st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6))
@settings(max_examples=50, deadline=None)
def test_margin_weights_are_the_excess_over_one_half(values: list[float]) -> None:
    scores = torch.tensor(values, dtype=torch.float64).view(2, 3)
    selection = TopHeads(4).select(scores)
    heads, weights = selection.heads, margin_weights(selection).weights
    assert weights is not None
    chosen = scores[heads[:, 0], heads[:, 1]]
    if bool((chosen > 0.5).any()):
        torch.testing.assert_close(weights, (chosen - 0.5).clamp_min(0))
    else:  # no head favours the context: equal weights rather than none
        assert weights.tolist() == [1.0] * 4
    assert selection.weights is not None and selection.weights.tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="unknown head_weighting"):
        Recipe("x", "x", head_weighting="soft")  # type: ignore[arg-type]


@pytest.mark.parametrize("calibrated", [False, True])
def test_lever_scorer_weights_rows_and_subtracts_the_prior(calibrated: bool) -> None:
    block, weights = answer_block()
    prior = torch.rand(3, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.2
    scorer = LeverScorer(continuation=0.5, calibration="N/A" if calibrated else None)
    tokens = brute_mass(block, weights, prior if calibrated else None)
    expected = torch.stack([tokens[..., [0, 1]].sum(-1), tokens[..., [1, 2]].sum(-1)], dim=-1)
    torch.testing.assert_close(scorer.score(PriorBlock.of(block, prior)), expected)
    with pytest.raises(ValueError, match="prior"):
        LeverScorer(calibration="N/A").score(block)


def test_lever_scorer_span_reductions() -> None:
    block, weights = answer_block()
    tokens = brute_mass(block, weights)  # [U, H, 3 tokens]; spans {0, 1} and {1, 2}
    spans = [[0, 1], [1, 2]]

    def per_span(reduce) -> torch.Tensor:
        return torch.stack([torch.stack([reduce(tokens[..., s]) for s in spans], -1)])[0]

    scorer = LeverScorer(continuation=0.5, reduce="mean")
    torch.testing.assert_close(scorer.score(block), per_span(lambda t: t.mean(-1)))
    top = LeverScorer(continuation=0.5, reduce="top", top_m=1)
    torch.testing.assert_close(top.score(block), per_span(lambda t: t.max(-1).values))
    # each span without its own first token: span {0, 1} keeps token 1, span {1, 2} keeps token 2
    skipped = LeverScorer(continuation=0.5, skip_first=True).score(block)
    torch.testing.assert_close(skipped, torch.stack([tokens[..., 1], tokens[..., 2]], -1))
    skipped_mean = LeverScorer(continuation=0.5, skip_first=True, reduce="mean").score(block)
    torch.testing.assert_close(skipped_mean, skipped)
    for bad in ({"reduce": "max"}, {"top_m": 0}, {"continuation": 1.0}, {"calibration": " "}):
        with pytest.raises(ValueError):
            LeverScorer(**bad)  # type: ignore[arg-type]
