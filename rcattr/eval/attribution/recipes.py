"""The attribution ablation: RCAttributor recipes, every one scored from the same pass per record.

A :class:`Recipe` is an :class:`~rcattr.RCAttributor` configuration: a span scorer and the
attributor's head options. :func:`ablation` lists the rows of the benchmark's ablation table: the
paper's recipe, each lever added to it alone, rcattr's default with each of its parts taken out,
and each remaining lever added to the default. The benchmark's ``sweep`` method runs one forward
per record that computes every span scorer the recipes need (:func:`span_scorers`) and then
combines them per recipe (:func:`score_recipes`), so every row sees the same logits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from transformers import PreTrainedModel

from rcattr._typing import TokenizerLike
from rcattr.attributor import HeadSpanScores, RCAttributor
from rcattr.eval.attribution.head_selection import RULES, RuleAttributor, Selector
from rcattr.scorers import AttentionScorer, RCScorer, SpanScorer

CALIBRATION = "N/A"  # the content-free answer of the calibration lever (ICR, QRHead)
PAPER = "paper"
DEFAULT = "default"


@dataclass(frozen=True)
class Recipe:
    """One row of the ablation: a span scorer and RCAttributor options.

    Attributes
    ----------
    label : str
        The row's name in the table.
    lever : str
        What the row changes, for grouping (``"paper"``, ``"default"``, or the lever's name).
    scorer : SpanScorer
        The span scorer.
    options : mapping
        RCAttributor keyword arguments besides ``span_scorer``.
    rule : callable, optional
        A head-selection rule of :mod:`rcattr.eval.attribution.head_selection` that replaces ``top_k``.
    """

    label: str
    lever: str
    scorer: SpanScorer = field(default_factory=AttentionScorer)
    options: Mapping[str, Any] = field(default_factory=dict)
    rule: Selector | None = None

    def attributor(self, model: PreTrainedModel, tokenizer: TokenizerLike) -> RCAttributor:
        if self.rule is not None:
            return RuleAttributor(model, tokenizer, self.rule, span_scorer=self.scorer, **self.options)
        return RCAttributor(model, tokenizer, span_scorer=self.scorer, **self.options)

    @property
    def name(self) -> str:
        """A command-line name: ``"paper"``, ``"default"``, or the label in one word
        (``"default+margin-weights"``, ``"default-continuation"``, ``"paper.top-5-heads"``)."""
        if self.lever in (PAPER, DEFAULT):
            return self.lever
        name = self.label.lower().replace(" − ", "-").replace(" + ", "+").replace(" · ", ".")
        return re.sub(r"[^a-z0-9+.\-]+", "-", name).strip("-")

    @property
    def scorer_key(self) -> str:
        """The scorer's key in the shared pass: one per distinct scorer setting (``"rc"`` for RC
        expectation, the key the RC mix reads)."""
        return "rc" if self.scorer == RCScorer() else repr(self.scorer)


PAPER_SCORER = AttentionScorer(continuation=0.0)
PAPER_OPTIONS: dict[str, Any] = {"top_k": 20, "votes": "mass"}


def ablation(top_k: int | float | str = "outliers") -> list[Recipe]:
    """The ablation's rows; ``top_k`` is the default recipe's head count (the runner's ``--top-k``)."""
    paper = Recipe(
        f"{PAPER}: attention · top-20 heads (RCAttributor.paper)", PAPER, PAPER_SCORER, PAPER_OPTIONS
    )
    default_scorer = AttentionScorer()
    default = Recipe(f"{DEFAULT}: RCAttributor()", DEFAULT, default_scorer, {"top_k": top_k})

    def on(base: Recipe, label: str, lever: str, scorer: SpanScorer | None = None, **options: Any) -> Recipe:
        return Recipe(f"{base.lever} {label}", lever, scorer or base.scorer, {**base.options, **options})

    def scorer(base: Recipe, **fields: Any) -> SpanScorer:
        assert isinstance(base.scorer, AttentionScorer)
        return replace(base.scorer, **fields)

    levers = [
        # levers added one at a time to the paper's recipe
        on(paper, "+ continuation 0.8", "continuation", scorer(paper, continuation=0.8)),
        on(paper, "+ share votes", "votes", votes="share"),
        on(paper, "+ outlier heads", "head count", top_k="outliers"),
        *(on(paper, f"· top-{k} heads", "head count", top_k=k) for k in (5, 10, 30)),
        on(paper, "+ margin weights", "head weighting", head_weighting="margin"),
        on(paper, "+ per-unit heads", "per-unit heads", per_unit_heads=True),
        on(paper, "+ span mean", "span length", scorer(paper, reduce="mean")),
        on(paper, "+ top-5 tokens per span", "span length", scorer(paper, reduce="top", top_m=5)),
        on(paper, "+ first token skipped", "sink tokens", scorer(paper, skip_first=True)),
        on(paper, f"+ calibration {CALIBRATION!r}", "calibration", scorer(paper, calibration=CALIBRATION)),
        on(paper, "+ RC mix 0.3", "RC + attention", rc_mix=0.3),
        on(paper, "· heads by E[Z]/std(Y)", "head score", head_score="rc_std"),
        on(paper, "· heads by raw E[Z]", "head score", head_score="rc"),
        on(paper, "· RC expectation scorer", "span scorer", RCScorer()),
        on(paper, "· all heads", "head count", top_k=1.0),
        on(paper, "· bottom-20 heads", "head count", bottom=True),
        # the default's parts taken out one at a time
        on(default, "− continuation", "continuation", scorer(default, continuation=0.0)),
        on(default, "− share votes", "votes", votes="mass"),
        on(default, "− outlier heads (top-20)", "head count", top_k=20),
        # levers added to the default
        on(default, "+ margin weights", "head weighting", head_weighting="margin"),
        on(default, "+ per-unit heads", "per-unit heads", per_unit_heads=True),
        on(default, "+ span mean", "span length", scorer(default, reduce="mean")),
        on(default, "+ top-5 tokens per span", "span length", scorer(default, reduce="top", top_m=5)),
        on(default, "+ first token skipped", "sink tokens", scorer(default, skip_first=True)),
        on(
            default, f"+ calibration {CALIBRATION!r}", "calibration", scorer(default, calibration=CALIBRATION)
        ),
        on(default, "+ RC mix 0.3", "RC + attention", rc_mix=0.3),
        on(default, "· bottom heads", "head count", bottom=True),
    ]
    return [paper, default, *levers]


def selection_ablation(top_k: int | float | str = "outliers") -> list[Recipe]:
    """The rows of the head-selection table (issue 35): the default, the paper's recipe, attention over all
    heads (mass votes, as :class:`~rcattr.baselines.AttentionAttributor`, and the default's scorer and share
    votes), and the default with each rule of :data:`rcattr.eval.attribution.head_selection.RULES` in place of its
    outlier heads."""
    paper, default = ablation(top_k)[:2]
    return [
        paper,
        default,
        Recipe(
            "attention · all heads (AttentionAttributor)",
            "head count",
            PAPER_SCORER,
            {**PAPER_OPTIONS, "top_k": 1.0},
        ),
        Recipe(f"{DEFAULT} · all heads", "head count", default.scorer, {**default.options, "top_k": 1.0}),
        *(
            Recipe(f"{DEFAULT} · {name}", "head selection", default.scorer, default.options, rule)
            for name, rule in RULES.items()
        ),
    ]


def span_scorers(recipes: list[Recipe]) -> dict[str, SpanScorer]:
    """Every span scorer the recipes need, keyed as :attr:`Recipe.scorer_key` (plus ``"rc"`` for the RC mix)."""
    scorers: dict[str, SpanScorer] = {recipe.scorer_key: recipe.scorer for recipe in recipes}
    if any(recipe.options.get("rc_mix") for recipe in recipes):
        scorers["rc"] = RCScorer()
    return scorers


class RecipeScorer:
    """Scores every recipe of a list from one pass's per-head scores (attributors built once)."""

    def __init__(self, recipes: list[Recipe], model: PreTrainedModel, tokenizer: TokenizerLike) -> None:
        self.recipes = [(recipe, recipe.attributor(model, tokenizer)) for recipe in recipes]
        self.scorers = span_scorers(recipes)

    def __call__(self, scores: HeadSpanScores) -> dict[str, tuple[torch.Tensor, torch.Tensor, int]]:
        """Each recipe's ``([n_spans], [n_outputs, n_spans])`` scores and its number of heads, by label."""
        out = {}
        for recipe, attributor in self.recipes:
            seq_attr, token_attr, selection = attributor.combine(scores, recipe.scorer_key)
            out[recipe.label] = (seq_attr, token_attr, len(selection.heads))
        return out
