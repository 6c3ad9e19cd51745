"""The ablation's recipes on tiny random models: per-head scores of one pass, the experimental levers'
``attribute()`` (:class:`~rcattr.eval.attribution.recipes.RecipeAttributor`) and its agreement with them."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.scorers import AttentionScorer
from rcattr.eval.attribution.levers import LeverScorer, UnitHeadSelection
from rcattr.eval.attribution.per_head import head_span_scores
from rcattr.eval.attribution.rc_span_scorers import RCBoundScorer, RCScorer
from rcattr.eval.attribution.recipes import Recipe, ablation, span_scorers
from rcattr.eval.attribution.selection_rules import BottomHeads
from rcattr.grounding.support import support_heads
from rcattr.heads.scores import top_heads
from rcattr.heads.selection import HeadSelection
from rcattr.heads.selectors import FixedHeads, OutlierHeads, TopHeads
from rcattr.text.prompting import render_prompt
from tests.helpers import char_tokenizer, tiny_configs, tiny_model
from tests.helpers.attribution import ANSWER, INPUT, answer_ids, captured_logits


def _normalised(table: torch.Tensor) -> torch.Tensor:
    return table / table.sum(-1, keepdim=True)


@pytest.mark.parametrize("votes", ["mass", "share"])
@pytest.mark.parametrize("rc_mix", [0.0, 0.4])
def test_combine_weights_votes_and_mix_like_brute_force(llama, votes: str, rc_mix: float) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    scores = head_span_scores(
        attributor,
        INPUT,
        ANSWER,
        granularity="chunk",
        output_granularity="sentence",
        span_scorers=[AttentionScorer(), RCScorer()],
    )
    heads = torch.tensor([[2, 1], [0, 3], [1, 0]])
    weights = torch.tensor([0.5, 2.0, 1.0])
    selection = HeadSelection(scores.head_scores, heads, "superiority", weights)
    answer, units = scores.combine(selection, "attention", votes=votes, rc_mix=rc_mix)  # type: ignore[arg-type]
    expected_units = torch.zeros(2, 3, dtype=torch.float64)
    for (layer, head), weight in zip(heads.tolist(), weights.tolist(), strict=True):
        evidence = scores.units["attention"][layer, head].double()  # [U, S]
        if votes == "share" or rc_mix:
            evidence = _normalised(evidence)
        if rc_mix:
            evidence = (1 - rc_mix) * evidence + rc_mix * _normalised(
                scores.units["rc"][layer, head].double()
            )
        expected_units += weight * evidence
    torch.testing.assert_close(units.double(), _normalised(expected_units))
    assert answer.shape == (3,)


def test_per_unit_heads_are_each_units_own_top_heads(llama) -> None:
    recipe = Recipe("per-unit", "per-unit heads", AttentionScorer(), TopHeads(2), "mass", per_unit_heads=True)
    attributor = recipe.attributor(llama, char_tokenizer())
    result = attributor.attribute(INPUT, ANSWER, granularity="chunk", output_granularity="sentence")
    scores = head_span_scores(
        attributor, INPUT, ANSWER, granularity="chunk", output_granularity="sentence", unit_scores=True
    )
    selection = result.head_selection
    assert isinstance(selection, UnitHeadSelection)
    assert selection.unit_heads is not None and selection.unit_heads.shape == (2, 2, 2)
    for unit in range(2):
        unit_scores = scores.unit_head_scores["superiority"][..., unit]
        assert selection.unit_heads[unit].tolist() == top_heads(unit_scores, 2).tolist()
        layers, heads = selection.unit_heads[unit].unbind(-1)
        expected = scores.units["attention"][layers, heads, unit].sum(0)
        torch.testing.assert_close(result.token_attr[unit], _normalised(expected).float())
    # the whole answer keeps the answer's heads
    assert selection.heads.tolist() == top_heads(scores.head_scores, 2).tolist()


def test_calibration_subtracts_what_a_content_free_answer_attends_to(llama) -> None:
    tokenizer = char_tokenizer()
    scorer = LeverScorer(continuation=0.0, calibration="N/A")
    heads = [(1, 2), (2, 0)]
    recipe = Recipe("calibrated", "calibration", scorer, FixedHeads(heads), "mass")
    result = recipe.attributor(llama, tokenizer).attribute(INPUT, ANSWER, granularity="chunk")
    ids, start, offsets = answer_ids(tokenizer, ANSWER)
    null_ids, _, _ = answer_ids(tokenizer, "N/A")
    answer_store, null_store = captured_logits(llama, ids, start), captured_logits(llama, null_ids, start)
    prompt = render_prompt(tokenizer, INPUT)
    chunk_keys = [
        [t for t, (a, b) in enumerate(offsets) if a >= s and b <= s + len(c) and b > a]
        for c, s in zip(prompt.chunks, prompt.chunk_starts, strict=True)
    ]
    totals = torch.zeros(3, dtype=torch.float64)
    for layer, head in heads:
        answer = torch.softmax(answer_store.layer(layer, fill=float("-inf"))[0][0, head] / 4.0, -1)  # [A, S]
        prior = torch.softmax(null_store.layer(layer, fill=float("-inf"))[0][0, head] / 4.0, -1).mean(0)
        calibrated = (answer[:, :start] - prior[:start]).clamp_min(0)
        for chunk, keys in enumerate(chunk_keys):
            totals[chunk] += calibrated[:, keys].sum(-1).mean()
    torch.testing.assert_close(result.seq_attr, (totals / totals.sum()).float(), atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="one calibration answer"):
        head_span_scores(
            RCAttributor(llama, tokenizer),
            INPUT,
            ANSWER,
            span_scorers={"a": scorer, "b": LeverScorer(calibration="none")},
        )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"head_weighting": "soft"}, "unknown head_weighting"),
        ({"head_weighting": "margin", "heads": OutlierHeads("rc")}, "margin"),
        ({"head_weighting": "margin", "heads": BottomHeads(2)}, "margin"),
        ({"per_unit_heads": True, "heads": FixedHeads([(0, 0)])}, "per_unit_heads"),
        ({"rc_mix": 1.5}, "rc_mix=1.5"),
        ({"lexical_gate": True, "rc_mix": 0.3}, "lexical_gate"),
    ],
)
def test_bad_recipe_options_are_named(options, message) -> None:
    with pytest.raises(ValueError, match=message):
        Recipe("bad", "bad", **options)


RECIPES = [
    Recipe("default", "default"),
    Recipe("per-unit heads", "x", heads=TopHeads(3), per_unit_heads=True),
    Recipe("calibration and RC mix", "x", LeverScorer(calibration="N/A"), rc_mix=0.3),
    Recipe("RC scorer, heads by rc_std", "x", RCScorer(), OutlierHeads("rc_std"), "mass"),
    Recipe("RC bound, margin weights", "x", RCBoundScorer(), head_weighting="margin"),
    Recipe("bottom heads", "x", heads=BottomHeads(2)),
    Recipe("fixed heads", "x", heads=FixedHeads([(1, 0), (0, 3)])),
    Recipe("BM25 where the heads disagree", "x", heads=TopHeads(4), lexical_gate=True),
    Recipe("every head ranked", "x", heads=TopHeads(3), blind_heads=True),
]


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
@pytest.mark.parametrize("recipe", RECIPES, ids=lambda recipe: recipe.label)
def test_attribute_scores_only_its_heads_and_equals_scoring_every_head(arch: str, recipe: Recipe) -> None:
    """attribute() scores the selected heads after the pass; every head's scores give the same result."""
    attributor = recipe.attributor(tiny_model(arch), char_tokenizer())
    result = attributor.attribute(INPUT, ANSWER, granularity="sentence", output_granularity="sentence")
    every = head_span_scores(
        attributor,
        INPUT,
        ANSWER,
        granularity="sentence",
        output_granularity="sentence",
        span_scorers=span_scorers([recipe]),
        unit_scores=recipe.per_unit_heads,
    )
    assert every.scored is None
    seq_attr, token_attr, selection = replace(recipe, heads=attributor.heads).combine(every)
    assert result.head_selection.heads.tolist() == selection.heads.tolist()
    torch.testing.assert_close(result.seq_attr, seq_attr.float())
    torch.testing.assert_close(result.token_attr, token_attr.float())
    torch.testing.assert_close(result.groundedness, every.groundedness(selection.heads).float())
    peak_heads = support_heads(result.head_selection.scores)
    torch.testing.assert_close(result.token_peak, every.token_peak(peak_heads).float())
    torch.testing.assert_close(result.token_support, torch.sigmoid(every.token_support(peak_heads)).float())
    torch.testing.assert_close(result.token_logprob, every.token_logprob.float())
    torch.testing.assert_close(result.lookback, every.lookback_ratio(selection.heads).float())


def test_recipes_have_unique_command_line_names() -> None:
    names = [recipe.name for recipe in ablation()]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z0-9+.\-]+", name) for name in names)
    assert {"paper", "default", "heads-vote+calibration-n-a", "heads-vote-continuation"} <= set(names)


def test_records_of_before_the_lexical_default_read_under_todays_labels() -> None:
    """A line that called the heads' vote "default" (its levers "default + ..."): its lexical row is today's
    default; a line of today's labels is read as it is."""
    from rcattr.eval.attribution.recipes import current_labels

    old = [
        "paper: x",
        "default: RCAttributor()",
        "default + BM25 where the heads disagree",
        "default · all heads",
    ]
    assert current_labels(old) == {
        "paper: x": "paper: x",
        "default: RCAttributor()": "heads' vote: RCAttributor(lexical=False)",
        "default + BM25 where the heads disagree": "default: RCAttributor()",
        "default · all heads": "heads' vote · all heads",
    }
    today = [recipe.label for recipe in ablation()]
    assert current_labels(today) == {label: label for label in today}
    assert {"default: RCAttributor()", "heads' vote: RCAttributor(lexical=False)"} <= set(today)


def test_the_blind_lever_ranks_every_head_and_the_default_only_those_that_see() -> None:
    """Tiny Gemma-3, windows of 80 tokens: the sliding layers 0 and 2 see the last documents from the answer, the
    full-attention layer 1 all of them."""
    config = tiny_configs()["gemma3"]
    config.sliding_window = 80
    torch.manual_seed(0)
    model, tokenizer = AutoModelForCausalLM.from_config(config).eval(), char_tokenizer()
    every = head_span_scores(
        RCAttributor(model, tokenizer), INPUT, ANSWER, span_scorers=span_scorers(RECIPES)
    )
    reach = every.reach.tolist()
    assert 0 < reach[0] == reach[2] < reach[1] == 1.0
    scores = every.every_head_score["superiority"]
    seeing = Recipe("default", "default", heads=TopHeads(3)).combine(every)[2]
    blind = Recipe("blind", "x", heads=TopHeads(3), blind_heads=True).combine(every)[2]
    assert {layer for layer, _ in seeing.as_pairs()} == {1}
    assert blind.heads.tolist() == top_heads(scores, 3).tolist() != seeing.heads.tolist()
