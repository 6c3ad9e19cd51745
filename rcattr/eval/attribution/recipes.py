"""The attribution ablation: RCAttributor recipes, every one scored from the same pass per record.

A [`Recipe`][rcattr.eval.attribution.recipes.Recipe] is an [`RCAttributor`][rcattr.attribution.attributor.RCAttributor] configuration (a span scorer, a head selector,
votes) with, for the levers that lost, the experimental pieces of [`rcattr.eval.attribution.levers`][rcattr.eval.attribution.levers]. [`ablation`][rcattr.eval.attribution.recipes.ablation] lists the rows of the benchmark's ablation table: the
paper's recipe, each lever added to it alone, rcattr's default (the heads' vote with BM25 where they disagree), the
heads' vote alone with each of its parts taken out, and each remaining lever added to the heads' vote. The benchmark's `sweep` method runs one forward
per record that computes every span scorer the recipes need ([`span_scorers`][rcattr.eval.attribution.recipes.span_scorers]) and then
combines them per recipe ([`RecipeScorer`][rcattr.eval.attribution.recipes.RecipeScorer]), so every row sees the same logits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from transformers import PreTrainedModel

from rcattr.attribution.attributor import HeadVotes, RCAttributor
from rcattr.attribution.base import Example
from rcattr.attribution.fusion import fuse_where_heads_disagree
from rcattr.attribution.reduction import Reducer, Reduction
from rcattr.attribution.scorers import AttentionScorer, SpanScorer
from rcattr.attribution.voting import Voted
from rcattr.eval.attribution.levers import (
    HEAD_WEIGHTINGS,
    HeadWeighting,
    LeverScorer,
    UnitHeadSelection,
    margin_weights,
    per_unit_selection,
)
from rcattr.eval.attribution.per_head import HeadSpanScores, PassReducer, lever_pass
from rcattr.eval.attribution.rc_span_scorers import RCScorer
from rcattr.eval.attribution.selection_rules import RULES, BottomHeads
from rcattr.heads.selection import HeadSelection
from rcattr.heads.selectors import HeadSelector, OutlierHeads, TopHeads, heads_for
from rcattr.options import TopK
from rcattr.protocols import TokenizerLike

CALIBRATION = "N/A"  # the content-free answer of the calibration lever (ICR, QRHead)
PAPER = "paper"
DEFAULT = "default"
VOTE = "heads' vote"
LEGACY_LEXICAL = f"{DEFAULT} + BM25 where the heads disagree"
"""The default's label in record files written while it was a lever (before 0.2.0, when the default was the heads'
vote alone): [`current_labels`][rcattr.eval.attribution.recipes.current_labels] reads those files under today's labels."""


@dataclass(frozen=True)
class Recipe:
    """One row of the ablation: RCAttributor's options, and the experimental levers.

    Attributes
    ----------
    label : str
        The row's name in the table.
    lever : str
        What the row changes, for grouping (`"paper"`, `"default"`, or the lever's name).
    scorer : SpanScorer
        The span scorer (a [`LeverScorer`][rcattr.eval.attribution.levers.LeverScorer] for its levers).
    heads : HeadSelector
        The head selector (a [`SelectionRule`][rcattr.eval.attribution.selection_rules.SelectionRule] for a rule).
    votes : {"mass", "share"}
    head_weighting : {"equal", "margin"}
        `"margin"`: [`margin_weights`][rcattr.eval.attribution.levers.margin_weights].
    per_unit_heads : bool
        Select the heads of each output unit from that unit's own head scores, rather than once for the
        whole answer.
    rc_mix : float in [0, 1]
        Mix RC expectation into the attention evidence: each head's two span-score distributions,
        weighted `1 - rc_mix` and `rc_mix` (computed in the same pass).
    lexical_gate : bool
        Fuse the vote with BM25 shares where the selected heads disagree ([`rcattr.attribution.fusion`][rcattr.attribution.fusion]).
    blind_heads : bool
        Choose heads among all of them, those whose sliding window does not reach the context too (rcattr's
        rule before heads that see the context were counted), rather than among those that see the whole context from the answer.
    """

    label: str
    lever: str
    scorer: SpanScorer = field(default_factory=AttentionScorer)
    heads: HeadSelector = field(default_factory=OutlierHeads)
    votes: HeadVotes = "share"
    head_weighting: HeadWeighting = "equal"
    per_unit_heads: bool = False
    rc_mix: float = 0.0
    lexical_gate: bool = False
    blind_heads: bool = False

    def __post_init__(self) -> None:
        if self.head_weighting not in HEAD_WEIGHTINGS:
            raise ValueError(
                f"unknown head_weighting {self.head_weighting!r}; choose one of {list(HEAD_WEIGHTINGS)}"
            )
        ranked = isinstance(self.heads, (OutlierHeads, TopHeads))
        if self.head_weighting == "margin" and (self.heads.score != "superiority" or not ranked):
            raise ValueError(
                "head_weighting='margin' weighs P(X > Y) above 1/2: it needs OutlierHeads or TopHeads "
                "with score='superiority'"
            )
        if self.per_unit_heads and not ranked:
            raise ValueError(
                "per_unit_heads selects each unit's top heads: it needs OutlierHeads or TopHeads"
            )
        if self.lexical_gate and (self.per_unit_heads or self.rc_mix):
            raise ValueError(
                "lexical_gate gates the selected heads' own votes: not with per_unit_heads or rc_mix"
            )
        if not 0 <= self.rc_mix <= 1:
            raise ValueError(f"rc_mix={self.rc_mix} must be in [0, 1]")

    @property
    def experimental(self) -> bool:
        """Whether the recipe uses a lever that [`RCAttributor`][rcattr.attribution.attributor.RCAttributor] does not have."""
        return (
            isinstance(self.scorer, LeverScorer)
            or self.head_weighting != "equal"
            or self.per_unit_heads
            or bool(self.rc_mix)
            or self.blind_heads
        )

    def attributor(self, model: PreTrainedModel, tokenizer: TokenizerLike) -> RCAttributor:
        """The recipe's `attribute()`: an RCAttributor, or a [`RecipeAttributor`][rcattr.eval.attribution.recipes.RecipeAttributor] for a lever."""
        if self.experimental:
            return RecipeAttributor(model, tokenizer, self)
        return RCAttributor(
            model, tokenizer, self.heads, self.scorer, votes=self.votes, lexical=self.lexical_gate
        )

    @property
    def name(self) -> str:
        """A command-line name: `"paper"`, `"default"`, or the label in one word
        (`"heads-vote+margin-weights"`, `"heads-vote-continuation"`, `"paper.top-5-heads"`)."""
        if self.lever in (PAPER, DEFAULT):
            return self.lever
        name = self.label.lower().replace(" − ", "-").replace(" + ", "+").replace(" · ", ".")
        return re.sub(r"[^a-z0-9+.\-]+", "-", name).strip("-")

    @property
    def scorer_key(self) -> str:
        """The scorer's key in the shared pass: one per distinct scorer setting (`"rc"` for RC
        expectation, the key the RC mix reads)."""
        return "rc" if self.scorer == RCScorer() else repr(self.scorer)

    def select(
        self, scores: torch.Tensor, unit_scores: torch.Tensor | None = None, reach: torch.Tensor | None = None
    ) -> HeadSelection:
        """The recipe's heads from every head's `[L, H]` scores (and, for `per_unit_heads`, each
        unit's `[L, H, U]`), among those that see the context by each layer's `[L]` reach."""
        reach = None if self.blind_heads else reach
        selection = self.heads.select(scores, reach)
        if self.head_weighting == "margin":
            selection = margin_weights(selection)
        if not self.per_unit_heads or unit_scores is None:
            return selection
        return per_unit_selection(selection, self.heads, unit_scores, self.head_weighting, reach)

    def combine(
        self, scores: HeadSpanScores, scorer: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, HeadSelection]:
        """The recipe's `[n_spans]` answer and `[n_outputs, n_spans]` unit scores and its head selection,
        from a pass's per-head scores (`scorer`: the key of its span scorer there, default its own)."""
        kind = self.heads.score
        unit_scores = scores.unit_head_scores.get(kind) if self.per_unit_heads else None
        selection = self.select(scores.every_head_score[kind], unit_scores, scores.reach)
        return (*self.vote(scores, selection, scorer or self.scorer_key)[:2], selection)

    def vote(self, scores: HeadSpanScores, selection: HeadSelection, scorer: str) -> Voted:
        """The selected heads' `[n_spans]` answer and `[n_outputs, n_spans]` unit scores (`scorer`: the
        key of the span scorer in the pass), fused with BM25 where the heads disagree for a
        `lexical_gate`."""
        seq_attr, token_attr = scores.combine(selection, scorer, votes=self.votes, rc_mix=self.rc_mix)
        if not self.lexical_gate:
            return Voted(seq_attr, token_attr)
        layers, index = selection.heads.to(seq_attr.device).unbind(1)
        evidence = (scores.answer[scorer][layers, index], scores.units[scorer][layers, index])
        return Voted(
            *fuse_where_heads_disagree((seq_attr, token_attr), evidence, selection.weights, scores.example)
        )


class RecipeAttributor(RCAttributor):
    """`attribute()` of a recipe with experimental levers: [`RCAttributor`][rcattr.attribution.attributor.RCAttributor]'s deferred pass
    with the levers' extras ([`lever_pass`][rcattr.eval.attribution.per_head.lever_pass]), its selection and its
    combination ([`Recipe.combine`][rcattr.eval.attribution.recipes.Recipe.combine])."""

    batch_forward = False  # its pass keeps the levers' extras, one example at a time

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike, recipe: Recipe) -> None:
        super().__init__(
            model, tokenizer, recipe.heads, recipe.scorer, votes=recipe.votes, lexical=recipe.lexical_gate
        )
        self.recipe = replace(recipe, heads=self.heads)

    def run_pass(self, example: Example, scorers: Mapping[str, SpanScorer]) -> Reducer:
        if self.recipe.rc_mix:
            scorers = {**scorers, "rc": scorers.get("rc", RCScorer())}
        return lever_pass(
            self.model,
            self.tokenizer,
            example,
            scorers,
            self.head_score,
            defer=True,
            unit_scores=self.recipe.per_unit_heads,
        )

    def select_heads(self, reducer: Reducer) -> HeadSelection:
        assert isinstance(reducer, PassReducer)
        units = reducer.unit_head_scores.get(self.head_score)
        return self.recipe.select(
            Reduction.stack(reducer.out.head_scores[self.head_score]),
            None if units is None else Reduction.stack(units),
            reducer.out.reach(),
        )

    def span_scores(self, example: Example, reducer: Reducer, selection: HeadSelection) -> Voted:
        assert isinstance(reducer, PassReducer)
        used = selection.heads
        if isinstance(selection, UnitHeadSelection) and selection.unit_heads is not None:
            used = torch.cat([used, selection.unit_heads.reshape(-1, 2)])
        reducer.score_heads(used)
        return self.recipe.vote(
            HeadSpanScores.of(reducer, example, self.n_heads), selection, self.scorer_name
        )


PAPER_SCORER = AttentionScorer(continuation=0.0)


def ablation(top_k: TopK = "outliers") -> list[Recipe]:
    """The ablation's rows; `top_k` is the default recipe's head count (the runner's `--top-k`)."""
    paper = Recipe(
        f"{PAPER}: attention · top-20 heads (RCAttributor.paper)", PAPER, PAPER_SCORER, TopHeads(20), "mass"
    )
    vote = Recipe(f"{VOTE}: RCAttributor(lexical=False)", VOTE, AttentionScorer(), heads_for(top_k))
    default = replace(vote, label=f"{DEFAULT}: RCAttributor()", lever=DEFAULT, lexical_gate=True)

    def on(base: Recipe, label: str, lever: str, **changes: Any) -> Recipe:
        return replace(base, label=f"{base.lever} {label}", lever=lever, **changes)

    def lever(base: Recipe, **fields: Any) -> LeverScorer:
        assert isinstance(base.scorer, AttentionScorer)
        return LeverScorer(continuation=base.scorer.continuation, **fields)

    levers = [
        # levers added one at a time to the paper's recipe
        on(paper, "+ continuation 0.8", "continuation", scorer=AttentionScorer(continuation=0.8)),
        on(paper, "+ share votes", "votes", votes="share"),
        on(paper, "+ outlier heads", "head count", heads=OutlierHeads()),
        *(on(paper, f"· top-{k} heads", "head count", heads=TopHeads(k)) for k in (5, 10, 30)),
        on(paper, "+ margin weights", "head weighting", head_weighting="margin"),
        on(paper, "+ per-unit heads", "per-unit heads", per_unit_heads=True),
        on(paper, "+ span mean", "span length", scorer=lever(paper, reduce="mean")),
        on(paper, "+ top-5 tokens per span", "span length", scorer=lever(paper, reduce="top", top_m=5)),
        on(paper, "+ first token skipped", "sink tokens", scorer=lever(paper, skip_first=True)),
        on(
            paper,
            f"+ calibration {CALIBRATION!r}",
            "calibration",
            scorer=lever(paper, calibration=CALIBRATION),
        ),
        on(paper, "+ RC mix 0.3", "RC + attention", rc_mix=0.3),
        on(paper, "· heads by E[Z]/std(Y)", "head score", heads=TopHeads(20, "rc_std")),
        on(paper, "· heads by raw E[Z]", "head score", heads=TopHeads(20, "rc")),
        on(paper, "· RC expectation scorer", "span scorer", scorer=RCScorer()),
        on(paper, "· all heads", "head count", heads=TopHeads(1.0), blind_heads=True),
        on(paper, "· bottom-20 heads", "head count", heads=BottomHeads(20)),
        # the heads' vote's parts taken out one at a time (the default is the heads' vote + BM25 where they disagree)
        on(vote, "− continuation", "continuation", scorer=AttentionScorer(continuation=0.0)),
        on(vote, "− share votes", "votes", votes="mass"),
        on(vote, "− outlier heads (top-20)", "head count", heads=TopHeads(20)),
        on(vote, "− seeing heads (all heads ranked)", "head reach", blind_heads=True),
        # levers added to the heads' vote
        on(vote, "+ margin weights", "head weighting", head_weighting="margin"),
        on(vote, "+ per-unit heads", "per-unit heads", per_unit_heads=True),
        on(vote, "+ span mean", "span length", scorer=lever(vote, reduce="mean")),
        on(vote, "+ top-5 tokens per span", "span length", scorer=lever(vote, reduce="top", top_m=5)),
        on(vote, "+ first token skipped", "sink tokens", scorer=lever(vote, skip_first=True)),
        on(
            vote,
            f"+ calibration {CALIBRATION!r}",
            "calibration",
            scorer=lever(vote, calibration=CALIBRATION),
        ),
        on(vote, "+ RC mix 0.3", "RC + attention", rc_mix=0.3),
        on(vote, "· bottom heads", "head count", heads=BottomHeads(vote.heads)),  # as many as its heads
    ]
    return [paper, default, vote, *levers]


def selection_ablation(top_k: TopK = "outliers") -> list[Recipe]:
    """The rows of the head-selection table: the paper's recipe, the default, the heads' vote alone
    (`lexical=False`), attention over all heads (mass votes, as `rcattr.baselines.AttentionAttributor`, and the
    heads' vote over every seeing head), the heads' vote with each rule of
    `rcattr.eval.attribution.selection_rules.RULES` in place of its outlier heads, and the heads' vote choosing
    among every head, those whose window does not reach the context too."""
    paper, default, vote = ablation(top_k)[:3]
    return [
        paper,
        default,
        vote,
        Recipe(
            "attention · all heads (AttentionAttributor)",
            "head count",
            PAPER_SCORER,
            TopHeads(1.0),
            "mass",
            blind_heads=True,
        ),
        replace(vote, label=f"{VOTE} · all heads", lever="head count", heads=TopHeads(1.0)),
        *(
            replace(vote, label=f"{VOTE} · {name}", lever="head selection", heads=rule)
            for name, rule in RULES.items()
        ),
        replace(
            vote, label=f"{VOTE} − seeing heads (all heads ranked)", lever="head reach", blind_heads=True
        ),
    ]


def current_labels(labels: Iterable[str]) -> dict[str, str]:
    """Today's label of each recipe label of a record line: a line written before the default was the heads' vote
    with BM25 where they disagree (it holds `LEGACY_LEXICAL` or a lever on "default" other than the default itself)
    called the heads' vote "default"; its lexical row is today's default."""
    labels = list(labels)
    legacy = any(label.startswith(f"{DEFAULT} ") for label in labels)
    if not legacy:
        return {label: label for label in labels}
    renamed = {
        f"{DEFAULT}: RCAttributor()": f"{VOTE}: RCAttributor(lexical=False)",
        LEGACY_LEXICAL: f"{DEFAULT}: RCAttributor()",
    }
    return {
        label: renamed.get(label, VOTE + label[len(DEFAULT) :] if label.startswith(f"{DEFAULT} ") else label)
        for label in labels
    }


def span_scorers(recipes: list[Recipe]) -> dict[str, SpanScorer]:
    """Every span scorer the recipes need, keyed as [`Recipe.scorer_key`][rcattr.eval.attribution.recipes.Recipe.scorer_key] (plus `"rc"` for the RC mix)."""
    scorers: dict[str, SpanScorer] = {recipe.scorer_key: recipe.scorer for recipe in recipes}
    if any(recipe.rc_mix for recipe in recipes):
        scorers["rc"] = RCScorer()
    return scorers


class RecipeScorer:
    """Scores every recipe of a list from one pass's per-head scores (head selectors checked once against
    the model: a count above its heads is capped)."""

    def __init__(self, recipes: list[Recipe], model: PreTrainedModel) -> None:
        text = model.config.get_text_config()
        layers, heads = text.num_hidden_layers, text.num_attention_heads
        self.recipes = [replace(recipe, heads=recipe.heads.for_model(layers, heads)) for recipe in recipes]
        self.scorers = span_scorers(recipes)
        self.unit_scores = any(recipe.per_unit_heads for recipe in recipes)

    def __call__(self, scores: HeadSpanScores) -> dict[str, tuple[torch.Tensor, torch.Tensor, int]]:
        """Each recipe's `([n_spans], [n_outputs, n_spans])` scores and its number of heads, by label."""
        out = {}
        for recipe in self.recipes:
            seq_attr, token_attr, selection = recipe.combine(scores)
            out[recipe.label] = (seq_attr, token_attr, len(selection.heads))
        return out
