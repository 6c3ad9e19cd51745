"""RCAttributor: attribute an answer to its context from one forward pass (RCStat §5, docs/design.md §2).

One teacher-forced forward over prompt ⊕ answer runs with :class:`~rcattr.capture.LogitCapture` on
the answer rows (a generated answer continues from its generation's cache, so the prompt runs once).
Each layer's raw logits are reduced as soon as they are computed to a score per head; nothing of size
``|s| x |s|`` is kept. The top-k heads are then chosen from the head scores, and only for them are the
logits recomputed from the queries and keys the pass kept, to give (1) per-head span scores for the
whole answer and for each output unit and (2) per answer token the context-versus-self
contextualization behind ``groundedness``. Their span scores are summed and normalised over spans
(paper Eq. 7). :meth:`RCAttributor.head_span_scores` computes (1) and (2) for every head instead, for
benchmarks that compare many head selections on one pass.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from transformers import DynamicCache, PreTrainedModel

from rcattr._compat import cache_argument
from rcattr._typing import TokenizerLike
from rcattr.attention import check_supported
from rcattr.base import AttributionInput, Example, SpanAttributor, SpanSpec, normalise, unit_sum
from rcattr.capture import CaptureStep, LogitCapture, raw_logits
from rcattr.heads import (
    HEAD_SCORES,
    HEAD_WEIGHTINGS,
    HeadCount,
    HeadScore,
    HeadWeighting,
    LayerRC,
    LayerSuperiority,
    fixed_heads,
    layer_rc,
    layer_superiority,
    min_heads,
    outlier_count,
    top_heads,
    weighted_heads,
)
from rcattr.result import HeadSelection, RCAttributionResult
from rcattr.scorers import AttentionScorer, RCScorer, SpanScorer, make_span_scorer
from rcattr.spans import SpanBlock, SpanIndex

HeadVotes = Literal["mass", "share"]
HEAD_VOTES: tuple[str, ...] = ("mass", "share")


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
        All three head scores (``superiority``, ``rc_std``, ``rc``), computed in the same pass.
    answer : dict of str to Tensor, shape [L, H, n_spans]
        Per span scorer, each head's span scores for the whole answer.
    units : dict of str to Tensor, shape [L, H, n_outputs, n_spans]
        The same per output unit.
    context_rc, self_rc : Tensor, shape [L, H, A]
        Per answer token, with X = its logits on the context and Y = Y(g, g): E[Z] = E[max(X - Y, 0)] and
        E[Z'] = E[max(Y - X, 0)] (the groundedness ratio's two terms).
    context_peak : Tensor, shape [L, H, A]
        Per answer token, P(max X > Y): the share of Y(g, g) below its highest context logit.
    unit_head_scores : dict of str to Tensor, shape [L, H, U]
        The three head scores of each output unit alone (its rows against Y(g, g)).
    scored : Tensor of bool, shape [L, H], or None
        The heads whose span scores and row statistics were computed (the others hold 0), when not all
        of them were: :meth:`RCAttributor.attribute` scores the heads it selects only.
    """

    example: Example
    head_scores: torch.Tensor
    every_head_score: dict[str, torch.Tensor]
    answer: dict[str, torch.Tensor]
    units: dict[str, torch.Tensor]
    context_rc: torch.Tensor
    self_rc: torch.Tensor
    context_peak: torch.Tensor
    unit_head_scores: dict[str, torch.Tensor]
    scored: torch.Tensor | None = None

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
        """``([n_spans], [n_outputs, n_spans])`` scores of ``scorer`` over the selected heads, normalised.

        Parameters
        ----------
        heads : Tensor of long, shape [k, 2], or HeadSelection
            The heads, summed with equal weights; or a selection, with its weights and, when it has
            them, its per-unit heads for the unit scores.
        scorer : str
            The span scorer whose per-head scores are combined.
        votes : {"mass", "share"}, default "mass"
            ``"mass"`` sums the heads' span scores (paper Eq. 7); ``"share"`` first normalises each
            head's scores over the spans, so every head has one vote however much it attends.
        rc_mix : float in [0, 1], default 0
            Share of RC expectation (scorer ``"rc"``, which must have been computed) in each head's
            evidence; both are normalised over spans first.
        """
        selection = heads if isinstance(heads, HeadSelection) else HeadSelection(self.head_scores, heads, "")
        self._check_scored(selection.heads, selection.unit_heads)
        device = self.head_scores.device
        layers, index = selection.heads.to(device).unbind(1)
        weights = _weights(selection.weights, len(layers), device)
        answer = self._evidence(self.answer, scorer, votes, rc_mix)[layers, index]  # [k, S]
        if selection.unit_heads is None:
            units = self._evidence(self.units, scorer, votes, rc_mix)[layers, index]  # [k, U, S]
            unit_scores = torch.einsum("k,kus->us", weights.to(units.dtype), units)
        else:
            unit_layers, unit_index = selection.unit_heads.to(device).unbind(-1)  # [U, k']
            per_unit = self._evidence(self.units, scorer, votes, rc_mix)
            rows = torch.arange(unit_layers.shape[0], device=device)[:, None]
            units = per_unit[unit_layers, unit_index, rows]  # [U, k', S]
            unit_weights = _weights(selection.unit_weights, unit_layers.shape[1], device)
            unit_scores = torch.einsum("uk,uks->us", unit_weights.to(units.dtype), units)
        return normalise(torch.einsum("k,ks->s", weights.to(answer.dtype), answer)), normalise(unit_scores)

    @staticmethod
    def _evidence(
        table: dict[str, torch.Tensor], scorer: str, votes: HeadVotes, rc_mix: float
    ) -> torch.Tensor:
        """Each head's evidence ``[L, H, ..., S]``: its span scores, or their shares over the spans."""
        if votes not in HEAD_VOTES:
            raise ValueError(f"unknown votes {votes!r}; choose one of {list(HEAD_VOTES)}")
        if not rc_mix:
            return normalise(table[scorer]) if votes == "share" else table[scorer]
        if "rc" not in table:
            raise ValueError("rc_mix needs the 'rc' span scorer's scores; compute them in the same pass")
        return (1 - rc_mix) * normalise(table[scorer]) + rc_mix * normalise(
            table["rc"].to(table[scorer].dtype)
        )

    def groundedness(self, heads: torch.Tensor) -> torch.Tensor:
        """``[A]`` share of each answer token's contextualization that comes from the context."""
        self._check_scored(heads)
        layers, index = heads.to(self.head_scores.device).unbind(1)
        context = self.context_rc[layers, index].sum(0)
        return context / (context + self.self_rc[layers, index].sum(0)).clamp_min(1e-30)

    def token_support(self, heads: torch.Tensor) -> torch.Tensor:
        """``[A]`` each answer token's mean P(max X > Y) over ``heads``: does some context token match it?"""
        self._check_scored(heads)
        layers, index = heads.to(self.head_scores.device).unbind(1)
        return self.context_peak[layers, index].mean(0)


def _weights(weights: torch.Tensor | None, count: int, device: torch.device) -> torch.Tensor:
    return torch.ones(count, device=device) if weights is None else weights.to(device)


@dataclass
class _Layout:
    """Token positions of one example in the form the per-layer reduction indexes with."""

    answer_start: int
    context_keys: torch.Tensor  # [C] positions of the attributed context tokens
    spans: SpanIndex  # context spans over those C tokens
    unit_rows: torch.Tensor  # [U, R] answer-row index of each output unit, padded with 0
    unit_mask: torch.Tensor  # [U, R] bool, False on padding
    n_answer: int
    membership: torch.Tensor  # [U, A] bool: the answer rows of each unit
    row_sentence: torch.Tensor  # [A] long: the answer sentence of each row, -1 for none

    @classmethod
    def of(cls, example: Example) -> _Layout:
        device = example.ids.device
        context_keys = sorted({token for token_range in example.context_ranges for token in token_range})
        where = {token: index for index, token in enumerate(context_keys)}
        spans = SpanIndex.from_ranges([[where[t] for t in r] for r in example.context_ranges], device=device)
        width = max(len(r) for r in example.unit_ranges)
        unit_rows = torch.zeros(len(example.unit_ranges), width, dtype=torch.long)
        unit_mask = torch.zeros(len(example.unit_ranges), width, dtype=torch.bool)
        membership = torch.zeros(len(example.unit_ranges), example.n_answer, dtype=torch.bool)
        for unit, rows in enumerate(example.unit_ranges):
            unit_rows[unit, : len(rows)] = torch.as_tensor(list(rows))
            unit_mask[unit, : len(rows)] = True
            membership[unit, list(rows)] = True
        row_sentence = torch.full((example.n_answer,), -1, dtype=torch.long)
        for sentence, rows in enumerate(example.answer_sentences):
            row_sentence[list(rows)] = sentence
        return cls(
            answer_start=example.answer_start,
            context_keys=torch.tensor(context_keys, dtype=torch.long, device=device),
            spans=spans,
            unit_rows=unit_rows.to(device),
            unit_mask=unit_mask.to(device),
            n_answer=example.n_answer,
            membership=membership.to(device),
            row_sentence=row_sentence.to(device),
        )


@dataclass
class _Reduction:
    """Per-layer reductions, filled by :class:`_Reducer`: head scores of every head, and span scores
    and row statistics of the heads scored (``scored``: layer -> the ``[h]`` head indices, in the order
    of the first dim of that layer's span and row tables)."""

    head_scores: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # kind -> layer -> [H]
    unit_head_scores: dict[str, dict[int, torch.Tensor]] = field(
        default_factory=dict
    )  # kind -> layer -> [H, U]
    answer_scores: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # [h, n_spans]
    unit_scores: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # [h, U, n_spans]
    context_rc: dict[int, torch.Tensor] = field(default_factory=dict)  # [h, A]: E[Z] per answer row
    self_rc: dict[int, torch.Tensor] = field(default_factory=dict)  # [h, A]: E[Z'] per answer row, same Y
    context_peak: dict[int, torch.Tensor] = field(default_factory=dict)  # [h, A]: P(max X > Y) per answer row
    scored: dict[int, torch.Tensor] = field(default_factory=dict)  # layer -> [h] head indices

    @staticmethod
    def stack(table: Mapping[int, torch.Tensor]) -> torch.Tensor:
        return torch.stack([table[layer] for layer in sorted(table)])

    def spread(self, table: Mapping[int, torch.Tensor], n_heads: int) -> torch.Tensor:
        """``[L, H, ...]`` from per-layer ``[h, ...]`` tables of the scored heads; 0 for the others."""
        layers = sorted(self.head_scores[next(iter(self.head_scores))])
        first = next(iter(table.values()))
        out = first.new_zeros((len(layers), n_heads, *first.shape[1:]))
        for row, layer in enumerate(layers):
            if layer in table:
                out[row, self.scored[layer]] = table[layer]
        return out

    def scored_mask(self, n_heads: int) -> torch.Tensor:
        """``[L, H]`` bool: the heads whose span scores and row statistics were computed."""
        layers = sorted(self.head_scores[next(iter(self.head_scores))])
        mask = torch.zeros(len(layers), n_heads, dtype=torch.bool)
        for row, layer in enumerate(layers):
            if layer in self.scored:
                mask[row, self.scored[layer].cpu()] = True
        return mask


class _Reducer:
    """Reduces one layer's answer-row logits ``[1, H, A, S]`` as soon as the layer has run.

    Every head's head scores are computed in the forward. The span scores and the per-row statistics,
    which cost the most, are computed then for every head (``defer=False``), or only after the pass
    for the heads a selection uses (``defer=True``, :meth:`score_heads`), from the layer's queries and
    keys, kept meanwhile: nothing of size ``[H, A, S]`` outlives its layer either way.
    """

    def __init__(
        self,
        layout: _Layout,
        scorers: Mapping[str, SpanScorer],
        head_score: HeadScore,
        priors: Mapping[int, torch.Tensor] | None = None,
        *,
        defer: bool = False,
    ) -> None:
        self.layout = layout
        self.scorers = scorers
        self.head_score = head_score
        self.priors = priors or {}
        self.defer = defer
        self.steps: dict[int, CaptureStep] = {}
        self.out = _Reduction(
            answer_scores={name: {} for name in scorers}, unit_scores={name: {} for name in scorers}
        )
        start = layout.answer_start
        # the run of columns from the first context key to the last, and which of them are context keys
        keys = layout.context_keys
        first, end = (int(keys[0]), int(keys[-1]) + 1) if keys.numel() else (0, 0)
        self.context_cover = slice(first, end)
        self.in_context = torch.zeros(end - first, dtype=torch.bool, device=keys.device)
        self.in_context[keys - first] = True
        self.answer_columns = slice(start, start + layout.n_answer)
        self.answer_keys = torch.arange(start, start + layout.n_answer, device=layout.context_keys.device)
        whole = torch.ones(1, layout.n_answer, dtype=torch.bool, device=layout.membership.device)
        self.answer_and_units = torch.cat([whole, layout.membership])  # [1 + U, A]

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        logits, visible = logits[0], step.visible[0]  # [H, A, S], [A, S]
        statistics: LayerRC | LayerSuperiority
        if self.defer and self.head_score == "superiority":
            # per-row counts only: the context's covering columns as a view, the keys between its
            # documents (e.g. newlines) masked, instead of a copy of the context's columns
            cover, answer = self.context_cover, self.answer_columns
            cross_visible = visible[:, cover] & self.in_context
            statistics = layer_superiority(
                logits[..., cover], cross_visible, logits[..., answer], visible[:, answer]
            )
        else:
            statistics = layer_rc(*self._samples(logits, visible), self.head_score)
        for kind, score in statistics.every_score.items():
            self.out.head_scores.setdefault(kind, {})[step.layer_idx] = score
        for kind, score in statistics.per_unit(self.layout.membership).items():
            self.out.unit_head_scores.setdefault(kind, {})[step.layer_idx] = score.T
        if self.defer:
            self.steps[step.layer_idx] = step
            return
        assert isinstance(statistics, LayerRC)
        heads = torch.arange(logits.shape[0], device=logits.device)
        self._score(step, heads, logits, visible, statistics)

    def score_heads(self, heads: torch.Tensor) -> None:
        """Span scores and row statistics of the ``[k, 2]`` (layer, head) pairs, after a deferred pass."""
        for layer in sorted(set(heads[:, 0].tolist())):
            step = self.steps[layer]
            assert step.query is not None and step.key is not None
            index = heads[heads[:, 0] == layer, 1].unique().to(step.query.device)
            group = step.query.shape[1] // step.key.shape[1]
            dtype = torch.promote_types(step.query.dtype, torch.float32)
            logits = raw_logits(step.query[:, index], step.key[:, index // group], dtype=dtype)[0]
            visible = step.visible[0]
            statistics = layer_rc(*self._samples(logits, visible), self.head_score)
            self._score(step, index, logits, visible, statistics)

    def _samples(
        self, logits: torch.Tensor, visible: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """X(p_ctx, g) ``[H, A, C]``, its ``[A, C]`` visibility, Y(g, g) ``[H, A, A]`` and its visibility."""
        keys, answer = self.layout.context_keys, self.answer_columns
        return (
            logits.index_select(-1, keys),
            visible.index_select(-1, keys),
            logits[..., answer],
            visible[:, answer],
        )

    def _score(
        self,
        step: CaptureStep,
        heads: torch.Tensor,
        logits: torch.Tensor,
        visible: torch.Tensor,
        statistics: LayerRC,
    ) -> None:
        """Span scores and row statistics of ``heads`` ``[h]``, from their logits ``[h, A, S]``."""
        layout, layer = self.layout, step.layer_idx
        self.out.scored[layer] = heads
        self.out.context_rc[layer] = statistics.context_rc
        self.out.self_rc[layer] = statistics.self_rc
        self.out.context_peak[layer] = statistics.context_peak
        prior = self.priors.get(layer)
        prior = None if prior is None else prior[heads]
        per_unit = layout.unit_rows.shape[0] > 1 or layout.unit_rows.shape[1] != layout.n_answer
        if per_unit:
            rows = layout.unit_rows
            unit_logits = logits[:, rows].transpose(0, 1)  # [U, h, R, S]
            unit_visible = visible[rows] & layout.unit_mask[..., None]
        for name, scorer in self.scorers.items():
            if not scorer.pools_rows:  # every answer row once, weighted per unit
                block = self._block(logits[None], visible[None], step, prior, self.answer_and_units)
                scores = scorer.score(block)  # [1 + U, h, n_spans]
                self.out.answer_scores[name][layer] = scores[0]
                self.out.unit_scores[name][layer] = scores[1:].transpose(0, 1)
                continue
            answer = scorer.score(self._block(logits[None], visible[None], step, prior))[0]
            self.out.answer_scores[name][layer] = answer
            units = (
                scorer.score(self._block(unit_logits, unit_visible, step, prior))
                if per_unit
                else answer[None]
            )
            self.out.unit_scores[name][layer] = units.transpose(0, 1)

    def _block(
        self,
        logits: torch.Tensor,
        visible: torch.Tensor,
        step: CaptureStep,
        prior: torch.Tensor | None,
        unit_rows: torch.Tensor | None = None,
    ) -> SpanBlock:
        """The scorer's view of ``[U, h, R, S]`` unit logits and their ``[U, R, S]`` visibility."""
        return SpanBlock(
            logits=logits,
            visible=visible,
            context_keys=self.layout.context_keys,
            answer_keys=self.answer_keys,
            spans=self.layout.spans,
            scaling=step.scaling,
            softcap=step.softcap,
            unit_rows=unit_rows,
            row_sentence=None if unit_rows is None else self.layout.row_sentence,
            prior=prior,
        )

    def result(self, example: Example, head_score: HeadScore, n_heads: int) -> HeadSpanScores:
        """The pass's :class:`HeadSpanScores` (0 for the heads that were not scored)."""
        out = self.out
        scored = out.scored_mask(n_heads)
        return HeadSpanScores(
            example=example,
            head_scores=_Reduction.stack(out.head_scores[head_score]),
            every_head_score={kind: _Reduction.stack(table) for kind, table in out.head_scores.items()},
            answer={name: out.spread(table, n_heads) for name, table in out.answer_scores.items()},
            units={name: out.spread(table, n_heads) for name, table in out.unit_scores.items()},
            context_rc=out.spread(out.context_rc, n_heads),
            self_rc=out.spread(out.self_rc, n_heads),
            context_peak=out.spread(out.context_peak, n_heads),
            unit_head_scores={kind: _Reduction.stack(table) for kind, table in out.unit_head_scores.items()},
            scored=None if bool(scored.all()) else scored,
        )


class _PriorReducer:
    """The attention a content-free answer gives each prompt key: ``[H, P]`` per layer, mean over its rows."""

    def __init__(self, n_prompt: int) -> None:
        self.n_prompt = n_prompt
        self.priors: dict[int, torch.Tensor] = {}

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        block = SpanBlock(
            logits=logits,
            visible=step.visible,
            context_keys=torch.empty(0, dtype=torch.long),
            answer_keys=torch.empty(0, dtype=torch.long),
            spans=SpanIndex.from_ranges([[0]]),
            scaling=step.scaling,
            softcap=step.softcap,
        )
        self.priors[step.layer_idx] = block.attention()[0, :, :, : self.n_prompt].mean(1)


class RCAttributor(SpanAttributor):
    """Attribute an answer to context spans with relative contextualization (RCStat).

    Every option below is one lever of the attribution benchmark's ablation (``docs/benchmarks.md``):
    the defaults are the recipe that measured best on both dev files and on a second architecture;
    :meth:`paper` builds the paper's recipe.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM with sdpa or eager attention (Llama, Mistral, Qwen2/3, Gemma3,
        Phi3, ...).
    tokenizer : transformers.PreTrainedTokenizerFast
        Its fast tokenizer (character offsets are needed).
    top_k : int, float or "outliers", default "outliers"
        Heads used for the span scores: a number, a fraction of all heads, or the heads whose score
        stands more than two standard deviations above the mean of all heads for this example
        (about 19 of SmolLM2's 270 heads, 3 of Gemma-3-270m's 72). A selection of fewer than 5% of the
        model's heads is flagged: ``result.head_selection.few_heads``.
    span_scorer : {"attention", "rc", "rc_bound"} or SpanScorer, default "attention"
        How a selected head scores a span: post-softmax attention mass (``AttentionScorer``, whose
        default carries each unit's evidence on over the answer rows that follow it), expected RC,
        or its upper bound.
    head_score : {"superiority", "rc_std", "rc"}, default "superiority"
        How heads are ranked: ``P(X > Y)``, ``E[Z] / std(Y)`` or the paper's raw ``E[Z]``.
    votes : {"mass", "share"}, default "share"
        How the selected heads' span scores add up: their mass (paper Eq. 7), or each head's share
        over the spans, so that a head that attends more does not outvote the others.
    head_weighting : {"equal", "margin"}, default "equal"
        Equal weights, or each head weighted by how far its P(X > Y) exceeds 1/2 (``superiority`` only).
    per_unit_heads : bool, default False
        Select the heads of each output unit from that unit's own head scores, rather than once
        for the whole answer.
    rc_mix : float in [0, 1], default 0
        Mix RC expectation into the attention evidence: each head's two span-score distributions,
        weighted ``1 - rc_mix`` and ``rc_mix`` (computed in the same pass).
    heads : sequence of (layer, head), optional
        Use these heads instead of selecting them.
    bottom : bool, default False
        Select the ``top_k`` lowest-scoring heads (the paper's ablation).

    Examples
    --------
    >>> model, tokenizer = rcattr.load_model()
    >>> attributor = RCAttributor(model, tokenizer)
    >>> result = attributor.attribute(ContextInput(documents, question), granularity="chunk")
    >>> result.top(1)
    [(TextSpan(start=0, end=92, text='The Eiffel Tower ...', source=0), 0.81)]
    >>> paper = RCAttributor.paper(model, tokenizer)  # the paper's recipe, for its table
    """

    name = "rc"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        top_k: HeadCount = "outliers",
        span_scorer: str | SpanScorer = "attention",
        *,
        head_score: HeadScore = "superiority",
        votes: HeadVotes = "share",
        head_weighting: HeadWeighting = "equal",
        per_unit_heads: bool = False,
        rc_mix: float = 0.0,
        heads: Sequence[tuple[int, int]] | None = None,
        bottom: bool = False,
    ) -> None:
        check_supported(model)
        super().__init__(model, tokenizer)
        if head_score not in HEAD_SCORES:
            raise ValueError(f"unknown head_score {head_score!r}; choose one of {list(HEAD_SCORES)}")
        if votes not in HEAD_VOTES:
            raise ValueError(f"unknown votes {votes!r}; choose one of {list(HEAD_VOTES)}")
        if head_weighting not in HEAD_WEIGHTINGS:
            raise ValueError(
                f"unknown head_weighting {head_weighting!r}; choose one of {list(HEAD_WEIGHTINGS)}"
            )
        if head_weighting == "margin" and (head_score != "superiority" or bottom):
            raise ValueError(
                "head_weighting='margin' weighs P(X > Y) above 1/2: it needs head_score='superiority' and bottom=False"
            )
        if not 0 <= rc_mix <= 1:
            raise ValueError(f"rc_mix={rc_mix} must be in [0, 1]")
        self.scorer = make_span_scorer(span_scorer)
        self.head_score: HeadScore = head_score
        self.votes: HeadVotes = votes
        self.head_weighting: HeadWeighting = head_weighting
        self.per_unit_heads = per_unit_heads
        self.rc_mix = rc_mix
        self.top_k = top_k
        self.bottom = bottom
        config = model.config.get_text_config()
        self.n_layers, self.n_heads = config.num_hidden_layers, config.num_attention_heads
        self.heads = None if heads is None else fixed_heads(heads, self.n_layers, self.n_heads)
        total = self.n_layers * self.n_heads
        if heads is None and isinstance(top_k, int) and top_k > total:
            warnings.warn(f"top_k={top_k} but the model has {total} heads; using all of them", stacklevel=2)
            self.top_k = total
        if heads is None:
            top_heads(torch.zeros(self.n_layers, self.n_heads), self.top_k)  # validates top_k now

    @classmethod
    def paper(cls, model: PreTrainedModel, tokenizer: TokenizerLike, **overrides: Any) -> RCAttributor:
        """The paper's recipe (RCStat §5.2): attention over the top-20 heads, each unit's own rows,
        heads summed by mass. Heads are ranked by the scale-free P(X > Y) as everywhere in rcattr
        (``head_score="rc"`` gives the paper's raw E[Z]); ``overrides`` change any argument."""
        recipe: dict[str, Any] = {
            "top_k": 20,
            "span_scorer": AttentionScorer(continuation=0.0),
            "head_score": "superiority",
            "votes": "mass",
        }
        return cls(model, tokenizer, **{**recipe, **overrides})

    @property
    def scorer_name(self) -> str:
        return _scorer_name(self.scorer)

    @property
    def result_label(self) -> str:
        """What a result's ``span_scorer`` names: the span scorer (the method, for a baseline built on this)."""
        return self.scorer_name

    def _scorers(self) -> dict[str, SpanScorer]:
        scorers = {self.scorer_name: self.scorer}
        if self.rc_mix:
            scorers.setdefault("rc", RCScorer())
        return scorers

    def _explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        reducer = self._forward(example, self._scorers(), defer=True)
        head_scores = reducer.out.head_scores[self.head_score]
        unit_scores = reducer.out.unit_head_scores[self.head_score]
        selection = self.select(_Reduction.stack(head_scores), _Reduction.stack(unit_scores))
        used = selection.heads
        if selection.unit_heads is not None:
            used = torch.cat([used, selection.unit_heads.reshape(-1, 2)])
        reducer.score_heads(used)
        scores = reducer.result(example, self.head_score, self.n_heads)
        seq_attr, token_attr = scores.combine(
            selection, self.scorer_name, votes=self.votes, rc_mix=self.rc_mix
        )
        if not bool((seq_attr > 0).any()):
            warnings.warn(
                "no selected head sees the context from the answer (sliding windows shorter than the "
                "distance?); every span scores 0",
                stacklevel=3,
            )
        groundedness = scores.groundedness(selection.heads).float().cpu()
        return example.result(
            seq_attr,
            token_attr,
            self.result_label,
            inp,
            groundedness=groundedness,
            token_support=scores.token_support(selection.heads).float().cpu(),
            unit_context_reliance=unit_sum(groundedness, example.unit_ranges)
            / torch.tensor([len(rows) for rows in example.unit_ranges]),
            head_selection=selection,
        )

    @torch.no_grad()
    def head_span_scores(
        self,
        inp: AttributionInput,
        target: str | None = None,
        *,
        granularity: SpanSpec = "sentence",
        output_granularity: SpanSpec = "answer",
        gen_args: Mapping[str, Any] | None = None,
        span_scorers: Sequence[str | SpanScorer] | Mapping[str, SpanScorer] | None = None,
    ) -> HeadSpanScores:
        """Every head's scores and span scores from one forward, for any selection afterwards.

        ``span_scorers`` (default: this attributor's, with ``"rc"`` for its ``rc_mix``) are all computed
        in the same pass, keyed by
        their names (or by the keys of a mapping, to compute one scorer with several settings); the
        top-k/bottom-k sweep of the benchmark is :meth:`HeadSpanScores.combine` over many head sets,
        and :meth:`combine` gives any attributor's result from them.
        """
        example = self.prepare(inp, target, granularity, output_granularity, gen_args)
        if span_scorers is None:
            scorers = self._scorers()
        elif isinstance(span_scorers, Mapping):
            scorers = dict(span_scorers)
        else:
            listed = [make_span_scorer(s) for s in span_scorers]
            scorers = {_scorer_name(scorer): scorer for scorer in listed}
        return self._forward(example, scorers).result(example, self.head_score, self.n_heads)

    @torch.no_grad()
    def head_scores(
        self, inp: AttributionInput, target: str | None = None, *, gen_args: Mapping[str, Any] | None = None
    ) -> torch.Tensor:
        """``[layers, heads]`` scores of every head for this example (``head_score`` kind)."""
        example = self.prepare(inp, target, "chunk", "answer", gen_args)
        reducer = self._forward(example, {}, defer=True)
        return _Reduction.stack(reducer.out.head_scores[self.head_score])

    def combine(
        self, scores: HeadSpanScores, scorer: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, HeadSelection]:
        """This attributor's ``[n_spans]`` answer and ``[n_outputs, n_spans]`` unit scores, and its
        head selection, from the per-head scores of a pass (which may have been run by another
        attributor with more span scorers: ``scorer`` names the one to use, default this one's)."""
        selection = self.select(
            scores.every_head_score[self.head_score], scores.unit_head_scores[self.head_score]
        )
        seq_attr, token_attr = scores.combine(
            selection, scorer or self.scorer_name, votes=self.votes, rc_mix=self.rc_mix
        )
        return seq_attr, token_attr, selection

    def select(self, scores: torch.Tensor, unit_scores: torch.Tensor | None = None) -> HeadSelection:
        """The heads this attributor uses, given every head's ``[L, H]`` scores (and, for
        ``per_unit_heads``, each unit's ``[L, H, U]``)."""
        if self.heads is not None:
            return HeadSelection(scores.cpu(), self.heads, "fixed")
        if self.bottom:
            return HeadSelection(
                scores.cpu(), top_heads(scores, self.top_k, bottom=True).cpu(), self.head_score
            )
        heads, weights = weighted_heads(scores, self.top_k, self.head_weighting)
        outliers = outlier_count(scores) if self.top_k == "outliers" else None
        selection = HeadSelection(
            scores.cpu(),
            heads.cpu(),
            self.head_score,
            weights.cpu(),
            outliers=outliers,
            minimum=min_heads(scores.numel()),
        )
        if not self.per_unit_heads or unit_scores is None:
            return selection
        per_unit = [weighted_heads(unit, self.top_k, self.head_weighting) for unit in unit_scores.unbind(-1)]
        width = max(len(heads) for heads, _ in per_unit)  # "outliers" differ in number: pad, weight 0
        unit_heads = torch.zeros(len(per_unit), width, 2, dtype=torch.long)
        unit_weights = torch.zeros(len(per_unit), width, dtype=scores.dtype)
        for unit, (heads, weights) in enumerate(per_unit):
            unit_heads[unit, : len(heads)] = heads.cpu()
            unit_weights[unit, : len(heads)] = weights.cpu()
        return dataclasses.replace(selection, unit_heads=unit_heads, unit_weights=unit_weights)

    def _forward(
        self, example: Example, scorers: Mapping[str, SpanScorer], *, defer: bool = False
    ) -> _Reducer:
        """Capture the answer's rows of a pass over prompt ⊕ answer; the reducer holds what they gave.

        One forward when nothing else needs the prompt's cache; otherwise the answer continues from
        it: a generated answer's cache already holds the prompt, and a calibrating answer reads a copy.
        """
        layout = _Layout.of(example)
        start = layout.answer_start
        calibration = _calibration(scorers.values())
        cache = example.prompt_cache_for()
        if cache is None and calibration is None:
            reducer = _Reducer(layout, scorers, self.head_score, defer=defer)
            with LogitCapture(self.model, reducer, query_positions=slice(start, None)):
                self.model(example.ids, use_cache=False, logits_to_keep=1)
            return reducer
        if cache is None:
            cache = DynamicCache()
            self.model(
                example.ids[:, :start], **cache_argument(self.model, cache), use_cache=True, logits_to_keep=1
            )
        priors = None if calibration is None else self._priors(copy.deepcopy(cache), start, calibration)
        reducer = _Reducer(layout, scorers, self.head_score, priors, defer=defer)
        with LogitCapture(self.model, reducer, query_positions=slice(start, None)):
            self.model(
                example.ids[:, start:], **cache_argument(self.model, cache), use_cache=True, logits_to_keep=1
            )
        return reducer

    def _priors(self, cache: DynamicCache, n_prompt: int, calibration: str) -> dict[int, torch.Tensor]:
        """Per layer, ``[H, n_prompt]`` attention of the content-free answer to every prompt key."""
        ids = self.tokenizer(calibration, add_special_tokens=False)["input_ids"]
        reducer = _PriorReducer(n_prompt)
        with LogitCapture(self.model, reducer, query_positions=slice(n_prompt, None)):
            self.model(
                torch.tensor([ids], device=self.model.device),
                **cache_argument(self.model, cache),
                use_cache=True,
                logits_to_keep=1,
            )
        return reducer.priors


def _calibration(scorers: Iterable[SpanScorer]) -> str | None:
    """The content-free answer the scorers subtract (one for all of them), or None."""
    texts = {text for scorer in scorers if (text := getattr(scorer, "calibration", None)) is not None}
    if len(texts) > 1:
        raise ValueError(f"span scorers computed together need one calibration answer, got {sorted(texts)}")
    return texts.pop() if texts else None


def _scorer_name(scorer: SpanScorer) -> str:
    return getattr(scorer, "name", "") or type(scorer).__name__
