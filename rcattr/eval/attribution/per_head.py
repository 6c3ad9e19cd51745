"""Every head's span scores from one pass, for benchmarks that compare many head selections on it.

[`head_span_scores`][rcattr.eval.attribution.per_head.head_span_scores] runs the reduction of [`RCAttributor`][rcattr.attribution.attributor.RCAttributor] ([`rcattr.attribution.reduction`][rcattr.attribution.reduction])
with the span scorers of every recipe at once and scores every head; [`HeadSpanScores`][rcattr.eval.attribution.per_head.HeadSpanScores] then gives
any selection's scores ([`HeadSpanScores.combine`][rcattr.eval.attribution.per_head.HeadSpanScores.combine]), so the sweep's top-k / bottom-k curve and every
recipe of the ablation see the same logits. [`lever_pass`][rcattr.eval.attribution.per_head.lever_pass] is that pass with the experimental levers
(per-unit head scores, calibration: [`rcattr.eval.attribution.levers`][rcattr.eval.attribution.levers]), deferred or not.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.base import AttributionInput, Example, SpanSpec
from rcattr.attribution.reduction import Layout, Reducer, Reduction, forward
from rcattr.attribution.scorers import SpanScorer, scorer_name
from rcattr.attribution.spans import SpanBlock, normalise
from rcattr.attribution.voting import HeadVotes, vote
from rcattr.eval.attribution.levers import (
    PriorBlock,
    UnitHeadSelection,
    calibration_of,
    prompt_priors,
    unit_head_scores,
)
from rcattr.grounding.support import support_log_odds
from rcattr.heads.scores import HeadScore, LayerRC, LayerSuperiority
from rcattr.heads.selection import HeadSelection
from rcattr.protocols import TokenizerLike
from rcattr.runtime.capture import CaptureStep
from rcattr.runtime.compat import cache_argument


@dataclass(frozen=True)
class HeadSpanScores:
    """Every head's statistics for one example, before any head is selected.

    Attributes
    ----------
    example : Example
        The spans and output units the scores refer to.
    head_scores : Tensor, shape [L, H]
        The score heads are ranked by.
    every_head_score : dict of str to Tensor, shape [L, H]
        Every head score computed in the pass (all three, `superiority`, `rc_std` and `rc`, when every
        head was scored).
    answer : dict of str to Tensor, shape [L, H, n_spans]
        Per span scorer, each head's span scores for the whole answer.
    units : dict of str to Tensor, shape [L, H, n_outputs, n_spans]
        The same per output unit.
    context_rc, self_rc : Tensor, shape [L, H, A]
        Per answer token, with X = its logits on the context and Y = Y(g, g): E[Z] = E[max(X - Y, 0)] and
        E[Z'] = E[max(Y - X, 0)] (the groundedness ratio's two terms).
    context_peak : Tensor, shape [L, H, A]
        Per answer token, P(max X > Y): the share of Y(g, g) below its highest context logit.
    lookback : Tensor, shape [L, H, A]
        Per answer token, the lookback ratio.
    n_self : Tensor of long, shape [L]
        Each layer's `|Y|`, the denominator of `context_peak`.
    token_logprob : Tensor, shape [A]
        Each answer token's log-probability.
    unit_head_scores : dict of str to Tensor, shape [L, H, U]
        The head scores of each output unit alone (its rows against Y(g, g)), when the pass computed them.
    scored : Tensor of bool, shape [L, H], or None
        The heads whose span scores and row statistics were computed (the others hold 0), when not all
        of them were.
    reach : Tensor, shape [L], or None
        Each layer's view of the context from the answer ([`reach`][rcattr.attribution.reduction.Reduction.reach]).
    """

    example: Example
    head_scores: torch.Tensor
    every_head_score: dict[str, torch.Tensor]
    answer: dict[str, torch.Tensor]
    units: dict[str, torch.Tensor]
    context_rc: torch.Tensor
    self_rc: torch.Tensor
    context_peak: torch.Tensor
    lookback: torch.Tensor
    n_self: torch.Tensor
    token_logprob: torch.Tensor
    unit_head_scores: dict[str, torch.Tensor]
    scored: torch.Tensor | None = None
    reach: torch.Tensor | None = None

    @classmethod
    def of(cls, reducer: PassReducer, example: Example, n_heads: int) -> HeadSpanScores:
        """The pass's scores (0 for the heads that were not scored)."""
        out = reducer.out
        assert out.token_logprob is not None  # set by the pass
        scored = out.scored_mask(n_heads)
        return cls(
            example=example,
            head_scores=Reduction.stack(out.head_scores[reducer.head_score]),
            every_head_score={kind: Reduction.stack(table) for kind, table in out.head_scores.items()},
            answer={name: out.spread(table, n_heads) for name, table in out.answer_scores.items()},
            units={name: out.spread(table, n_heads) for name, table in out.unit_scores.items()},
            context_rc=out.spread(out.context_rc, n_heads),
            self_rc=out.spread(out.self_rc, n_heads),
            context_peak=out.spread(out.context_peak, n_heads),
            lookback=out.spread(out.lookback, n_heads),
            n_self=torch.tensor(
                [out.self_size.get(layer, 0) for layer in sorted(out.head_scores[reducer.head_score])]
            ),
            token_logprob=out.token_logprob,
            unit_head_scores={kind: Reduction.stack(t) for kind, t in reducer.unit_head_scores.items()},
            scored=None if bool(scored.all()) else scored,
            reach=out.reach(),
        )

    def _check_scored(self, *heads: torch.Tensor | None) -> None:
        if self.scored is None:
            return
        for table in heads:
            if table is None:
                continue
            pairs = table.reshape(-1, 2).cpu()
            if not bool(self.scored[pairs[:, 0], pairs[:, 1]].all()):
                raise ValueError(
                    "these head span scores were computed for other heads than the ones asked for"
                )

    def combine(
        self,
        heads: torch.Tensor | HeadSelection,
        scorer: str,
        *,
        votes: HeadVotes = "mass",
        rc_mix: float = 0.0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`([n_spans], [n_outputs, n_spans])` scores of `scorer` over the selected heads, normalised.

        Parameters
        ----------
        heads : Tensor of long, shape [k, 2], or HeadSelection
            The heads, summed with equal weights; or a selection, with its weights and, for a
            [`UnitHeadSelection`][rcattr.eval.attribution.levers.UnitHeadSelection], its per-unit heads for the unit
            scores.
        scorer : str
            The span scorer whose per-head scores are combined.
        votes : {"mass", "share"}, default "mass"
            As [`RCAttributor`][rcattr.attribution.attributor.RCAttributor]'s.
        rc_mix : float in [0, 1], default 0
            Share of RC expectation (scorer `"rc"`, which must have been computed) in each head's
            evidence; both are normalised over spans first.
        """
        selection = heads if isinstance(heads, HeadSelection) else HeadSelection(self.head_scores, heads, "")
        unit_heads = selection.unit_heads if isinstance(selection, UnitHeadSelection) else None
        self._check_scored(selection.heads, unit_heads)
        device = self.head_scores.device
        layers, index = selection.heads.to(device).unbind(1)
        if not rc_mix:
            answer = vote(self.answer[scorer][layers, index], selection.weights, votes)
        else:
            answer = _sum(self._mixed(self.answer, scorer, rc_mix)[layers, index], selection.weights)
        if unit_heads is None:
            if not rc_mix:
                return answer, vote(self.units[scorer][layers, index], selection.weights, votes)
            return answer, _sum(self._mixed(self.units, scorer, rc_mix)[layers, index], selection.weights)
        assert isinstance(selection, UnitHeadSelection) and selection.unit_weights is not None
        per_unit = self._mixed(self.units, scorer, rc_mix) if rc_mix else self.units[scorer]
        if votes == "share" and not rc_mix:
            per_unit = normalise(per_unit)
        unit_layers, unit_index = unit_heads.to(device).unbind(-1)  # [U, k']
        rows = torch.arange(unit_layers.shape[0], device=device)[:, None]
        units = per_unit[unit_layers, unit_index, rows]  # [U, k', S]
        unit_weights = selection.unit_weights.to(device).to(units.dtype)
        return answer, normalise(torch.einsum("uk,uks->us", unit_weights, units))

    @staticmethod
    def _mixed(table: dict[str, torch.Tensor], scorer: str, rc_mix: float) -> torch.Tensor:
        """Each head's evidence `[L, H, ..., S]`: shares of `scorer` mixed with those of RC expectation."""
        if "rc" not in table:
            raise ValueError("rc_mix needs the 'rc' span scorer's scores; compute them in the same pass")
        return (1 - rc_mix) * normalise(table[scorer]) + rc_mix * normalise(
            table["rc"].to(table[scorer].dtype)
        )

    def groundedness(self, heads: torch.Tensor) -> torch.Tensor:
        """`[A]` share of each answer token's contextualization that comes from the context."""
        self._check_scored(heads)
        layers, index = heads.to(self.head_scores.device).unbind(1)
        context = self.context_rc[layers, index].sum(0)
        return context / (context + self.self_rc[layers, index].sum(0)).clamp_min(1e-30)

    def token_peak(self, heads: torch.Tensor) -> torch.Tensor:
        """`[A]` each answer token's mean P(max X > Y) over `heads`: does some context token match it?"""
        self._check_scored(heads)
        layers, index = heads.to(self.head_scores.device).unbind(1)
        return self.context_peak[layers, index].mean(0)

    def token_support(self, heads: torch.Tensor) -> torch.Tensor:
        """`[A]` each answer token's support log-odds on `heads` ([`rcattr.grounding.support.support_log_odds`][rcattr.grounding.support.support_log_odds])."""
        self._check_scored(heads)
        layers, index = heads.to(self.head_scores.device).unbind(1)
        return support_log_odds(self.token_logprob, self.context_peak[layers, index], self.n_self[layers])

    def lookback_ratio(self, heads: torch.Tensor) -> torch.Tensor:
        """`[A]` each answer token's lookback ratio averaged over `heads`."""
        self._check_scored(heads)
        layers, index = heads.to(self.head_scores.device).unbind(1)
        return self.lookback[layers, index].mean(0)


def _sum(evidence: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """`[k, ..., S]` evidence already in shares, summed with `[k]` weights and normalised."""
    return vote(evidence, weights, "mass")


class PassReducer(Reducer):
    """[`Reducer`][rcattr.attribution.reduction.Reducer] with the levers' extras: each output unit's head scores
    (`unit_scores`) and a calibration's per-layer priors `[H, K]` in the scorers' blocks."""

    def __init__(
        self,
        layout: Layout,
        scorers: Mapping[str, SpanScorer],
        head_score: HeadScore,
        *,
        defer: bool = False,
        unit_scores: bool = False,
        priors: Mapping[int, torch.Tensor] | None = None,
    ) -> None:
        super().__init__(layout, scorers, head_score, defer=defer)
        self.unit_scores = unit_scores
        self.priors = priors or {}
        self.unit_head_scores: dict[str, dict[int, torch.Tensor]] = {}  # kind -> layer -> [H, U]

    def record_layer(self, layer: int, statistics: LayerRC | LayerSuperiority) -> None:
        super().record_layer(layer, statistics)
        if self.unit_scores:
            for kind, score in unit_head_scores(statistics, self.layout.membership).items():
                self.unit_head_scores.setdefault(kind, {})[layer] = score.T

    def span_block(
        self,
        logits: torch.Tensor,
        visible: torch.Tensor,
        step: CaptureStep,
        heads: torch.Tensor,
        unit_rows: torch.Tensor | None = None,
    ) -> SpanBlock:
        block = super().span_block(logits, visible, step, heads, unit_rows)
        prior = self.priors.get(step.layer_idx)
        return block if prior is None else PriorBlock.of(block, prior[heads])


def lever_pass(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    example: Example,
    scorers: Mapping[str, SpanScorer],
    head_score: HeadScore,
    *,
    defer: bool = False,
    unit_scores: bool = False,
) -> PassReducer:
    """The pass over `example` into a [`PassReducer`][rcattr.eval.attribution.per_head.PassReducer]. A calibrated scorer's content-free answer runs
    on a copy of the prompt's cache first (the prompt is run on its own when the example has no cache)."""
    layout = Layout.of(example)
    calibration = calibration_of(scorers.values())
    if calibration is None:
        reducer = PassReducer(layout, scorers, head_score, defer=defer, unit_scores=unit_scores)
        forward(model, example, reducer)
        return reducer
    start = example.answer_start
    cache = example.prompt_cache_for()
    if cache is None:
        cache = DynamicCache()
        model(example.ids[:, :start], **cache_argument(model, cache), use_cache=True, logits_to_keep=1)
    priors = prompt_priors(model, tokenizer, copy.deepcopy(cache), start, calibration)
    reducer = PassReducer(layout, scorers, head_score, defer=defer, unit_scores=unit_scores, priors=priors)
    forward(model, example, reducer, cache)
    return reducer


@torch.no_grad()
def head_span_scores(
    attributor: RCAttributor,
    inp: AttributionInput,
    target: str | None = None,
    *,
    granularity: SpanSpec = "sentence",
    output_granularity: SpanSpec = "answer",
    gen_args: Mapping[str, Any] | None = None,
    span_scorers: Sequence[SpanScorer] | Mapping[str, SpanScorer] | None = None,
    unit_scores: bool = False,
) -> HeadSpanScores:
    """Every head's scores and span scores from one forward of `attributor`'s model, for any selection.

    `span_scorers` (default: the attributor's) are all computed in the same pass, keyed by their names
    (or by the keys of a mapping, to compute one scorer with several settings); `unit_scores` adds each
    output unit's head scores (for per-unit heads).
    """
    example = attributor.prepare(inp, target, granularity, output_granularity, gen_args)
    if span_scorers is None:
        scorers = {attributor.scorer_name: attributor.scorer}
    elif isinstance(span_scorers, Mapping):
        scorers = dict(span_scorers)
    else:
        scorers = {scorer_name(scorer): scorer for scorer in span_scorers}
    reducer = lever_pass(
        attributor.model,
        attributor.tokenizer,
        example,
        scorers,
        attributor.head_score,
        unit_scores=unit_scores,
    )
    return HeadSpanScores.of(reducer, example, attributor.n_heads)
