"""RCAttributor: attribute an answer to its context from one forward pass (RCStat §5, DESIGN §2).

One teacher-forced forward over prompt ⊕ answer runs with :class:`~rcattr.capture.LogitCapture` on
the answer rows. Each layer's raw logits are reduced as soon as they are computed to (1) a score
per head, (2) per-head span scores for the whole answer and for each output unit, and (3) per
answer token the context-versus-self contextualization behind ``groundedness``; nothing of size
``|s| x |s|`` is kept. The top-k heads are then chosen from the head scores, their span scores
summed and normalised over spans (paper Eq. 7).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedModel

from rcattr._typing import TokenizerLike
from rcattr.base import AttributionInput, Example, SpanAttributor, SpanSpec, normalise
from rcattr.capture import CaptureStep, LogitCapture, check_supported
from rcattr.heads import HEAD_SCORES, HeadScore, fixed_heads, layer_rc, top_heads
from rcattr.result import HeadSelection, RCAttributionResult
from rcattr.scorers import SpanScorer, make_span_scorer
from rcattr.spans import SpanBlock, SpanIndex


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
        Per answer token, E[Z] of its context logits and of its own answer logits against Y(g, g).
    """

    example: Example
    head_scores: torch.Tensor
    every_head_score: dict[str, torch.Tensor]
    answer: dict[str, torch.Tensor]
    units: dict[str, torch.Tensor]
    context_rc: torch.Tensor
    self_rc: torch.Tensor

    def combine(self, heads: torch.Tensor, scorer: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``([n_spans], [n_outputs, n_spans])`` scores of ``scorer`` summed over ``heads [k, 2]`` and normalised."""
        layers, index = heads.to(self.head_scores.device).unbind(1)
        answer = self.answer[scorer][layers, index].sum(0)
        units = self.units[scorer][layers, index].sum(0)
        return normalise(answer), normalise(units)

    def groundedness(self, heads: torch.Tensor) -> torch.Tensor:
        """``[A]`` share of each answer token's contextualization that comes from the context."""
        layers, index = heads.to(self.head_scores.device).unbind(1)
        context = self.context_rc[layers, index].sum(0)
        return context / (context + self.self_rc[layers, index].sum(0)).clamp_min(1e-30)


@dataclass
class _Layout:
    """Token positions of one example in the form the per-layer reduction indexes with."""

    answer_start: int
    context_keys: torch.Tensor  # [C] positions of the attributed context tokens
    spans: SpanIndex  # context spans over those C tokens
    unit_rows: torch.Tensor  # [U, R] answer-row index of each output unit, padded with 0
    unit_mask: torch.Tensor  # [U, R] bool, False on padding
    n_answer: int

    @classmethod
    def of(cls, example: Example) -> _Layout:
        device = example.ids.device
        context_keys = sorted({token for token_range in example.context_ranges for token in token_range})
        where = {token: index for index, token in enumerate(context_keys)}
        spans = SpanIndex.from_ranges([[where[t] for t in r] for r in example.context_ranges], device=device)
        width = max(len(r) for r in example.unit_ranges)
        unit_rows = torch.zeros(len(example.unit_ranges), width, dtype=torch.long)
        unit_mask = torch.zeros(len(example.unit_ranges), width, dtype=torch.bool)
        for unit, rows in enumerate(example.unit_ranges):
            unit_rows[unit, : len(rows)] = torch.as_tensor(list(rows))
            unit_mask[unit, : len(rows)] = True
        return cls(
            answer_start=example.answer_start,
            context_keys=torch.tensor(context_keys, dtype=torch.long, device=device),
            spans=spans,
            unit_rows=unit_rows.to(device),
            unit_mask=unit_mask.to(device),
            n_answer=example.n_answer,
        )


@dataclass
class _Reduction:
    """Per-layer reductions, filled by :class:`_Reducer` during the forward."""

    head_scores: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # kind -> layer -> [H]
    answer_scores: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # [H, n_spans]
    unit_scores: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # [U, H, n_spans]
    context_rc: dict[int, torch.Tensor] = field(default_factory=dict)  # [H, A]: E[Z] per answer row
    self_rc: dict[int, torch.Tensor] = field(default_factory=dict)  # [H, A]: E[Z'] per answer row, same Y

    @staticmethod
    def stack(table: Mapping[int, torch.Tensor]) -> torch.Tensor:
        return torch.stack([table[layer] for layer in sorted(table)])


class _Reducer:
    """Reduces one layer's answer-row logits ``[1, H, A, S]`` as soon as the layer has run."""

    def __init__(self, layout: _Layout, scorers: Mapping[str, SpanScorer], head_score: HeadScore) -> None:
        self.layout = layout
        self.scorers = scorers
        self.head_score = head_score
        self.out = _Reduction(
            answer_scores={name: {} for name in scorers}, unit_scores={name: {} for name in scorers}
        )
        start = layout.answer_start
        self.answer_keys = torch.arange(start, start + layout.n_answer, device=layout.context_keys.device)

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        layout, layer = self.layout, step.layer_idx
        logits, visible = logits[0], step.visible[0]  # [H, A, S], [A, S]
        cross = logits.index_select(-1, layout.context_keys)  # [H, A, C]
        cross_visible = visible.index_select(-1, layout.context_keys)
        own = logits.index_select(-1, self.answer_keys)  # [H, A, A]
        own_visible = visible.index_select(-1, self.answer_keys)
        statistics = layer_rc(cross, cross_visible, own, own_visible, self.head_score)
        for kind, score in statistics.every_score.items():
            self.out.head_scores.setdefault(kind, {})[layer] = score
        self.out.context_rc[layer] = statistics.context_rc
        self.out.self_rc[layer] = statistics.self_rc
        per_unit = layout.unit_rows.shape[0] > 1 or layout.unit_rows.shape[1] != layout.n_answer
        if per_unit:
            rows = layout.unit_rows
            unit_logits = logits[:, rows].transpose(0, 1)  # [U, H, R, S]
            unit_visible = visible[rows] & layout.unit_mask[..., None]
        for name, scorer in self.scorers.items():
            answer = scorer.score(self._block(logits[None], visible[None], step))[0]
            self.out.answer_scores[name][layer] = answer
            self.out.unit_scores[name][layer] = (
                scorer.score(self._block(unit_logits, unit_visible, step)) if per_unit else answer[None]
            )

    def _block(self, logits: torch.Tensor, visible: torch.Tensor, step: CaptureStep) -> SpanBlock:
        """The scorer's view of ``[U, H, R, S]`` unit logits and their ``[U, R, S]`` visibility."""
        return SpanBlock(
            logits=logits,
            visible=visible,
            context_keys=self.layout.context_keys,
            answer_keys=self.answer_keys,
            spans=self.layout.spans,
            scaling=step.scaling,
            softcap=step.softcap,
        )


class RCAttributor(SpanAttributor):
    """Attribute an answer to context spans with relative contextualization (RCStat).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM with sdpa or eager attention (Llama, Mistral, Qwen2/3, Gemma3,
        Phi3, ...).
    tokenizer : transformers.PreTrainedTokenizerFast
        Its fast tokenizer (character offsets are needed).
    top_k : int or float, default 20
        Heads used for the span scores, or a fraction of all heads.
    span_scorer : {"attention", "rc", "rc_bound"} or SpanScorer, default "attention"
        How a selected head scores a span: post-softmax attention mass (best on QuoteSum and
        Veri-Gran, see the README's benchmark), expected RC, or its upper bound.
    head_score : {"superiority", "rc_std", "rc"}, default "superiority"
        How heads are ranked: ``P(X > Y)``, ``E[Z] / std(Y)`` or the paper's raw ``E[Z]``.
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
    """

    name = "rc"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        top_k: int | float = 20,
        span_scorer: str | SpanScorer = "attention",
        *,
        head_score: HeadScore = "superiority",
        heads: Sequence[tuple[int, int]] | None = None,
        bottom: bool = False,
    ) -> None:
        check_supported(model)
        super().__init__(model, tokenizer)
        if head_score not in HEAD_SCORES:
            raise ValueError(f"unknown head_score {head_score!r}; choose one of {list(HEAD_SCORES)}")
        self.scorer = make_span_scorer(span_scorer)
        self.head_score: HeadScore = head_score
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

    @property
    def scorer_name(self) -> str:
        return _scorer_name(self.scorer)

    @property
    def result_label(self) -> str:
        """What a result's ``span_scorer`` names: the span scorer (the method, for a baseline built on this)."""
        return self.scorer_name

    def _explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        scores = self._forward(example, {self.scorer_name: self.scorer})
        selection = self.select(scores.head_scores)
        seq_attr, token_attr = scores.combine(selection.heads, self.scorer_name)
        if not bool((seq_attr > 0).any()):
            warnings.warn(
                "no selected head sees the context from the answer (sliding windows shorter than the "
                "distance?); every span scores 0",
                stacklevel=3,
            )
        return example.result(
            seq_attr,
            token_attr,
            self.result_label,
            inp,
            groundedness=scores.groundedness(selection.heads).float().cpu(),
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
        span_scorers: Sequence[str | SpanScorer] | None = None,
    ) -> HeadSpanScores:
        """Every head's scores and span scores from one forward, for any selection afterwards.

        ``span_scorers`` (default: this attributor's) are all computed in the same pass; the
        top-k/bottom-k sweep of the benchmark is :meth:`HeadSpanScores.combine` over many head sets.
        """
        example = self.prepare(inp, target, granularity, output_granularity, gen_args)
        scorers = [self.scorer] if span_scorers is None else [make_span_scorer(s) for s in span_scorers]
        return self._forward(example, {_scorer_name(scorer): scorer for scorer in scorers})

    @torch.no_grad()
    def head_scores(
        self, inp: AttributionInput, target: str | None = None, *, gen_args: Mapping[str, Any] | None = None
    ) -> torch.Tensor:
        """``[layers, heads]`` scores of every head for this example (``head_score`` kind)."""
        example = self.prepare(inp, target, "chunk", "answer", gen_args)
        return self._forward(example, {}).head_scores

    def select(self, scores: torch.Tensor) -> HeadSelection:
        """The heads this attributor uses, given every head's ``[L, H]`` scores."""
        if self.heads is not None:
            return HeadSelection(scores.cpu(), self.heads, "fixed")
        return HeadSelection(
            scores.cpu(), top_heads(scores, self.top_k, bottom=self.bottom).cpu(), self.head_score
        )

    def _forward(self, example: Example, scorers: Mapping[str, SpanScorer]) -> HeadSpanScores:
        layout = _Layout.of(example)
        reducer = _Reducer(layout, scorers, self.head_score)
        with LogitCapture(self.model, reducer, query_positions=slice(layout.answer_start, None)):
            self.model(example.ids, logits_to_keep=1)  # no vocabulary logits: only the captured rows matter
        out = reducer.out
        return HeadSpanScores(
            example=example,
            head_scores=_Reduction.stack(out.head_scores[self.head_score]),
            every_head_score={kind: _Reduction.stack(table) for kind, table in out.head_scores.items()},
            answer={name: _Reduction.stack(table) for name, table in out.answer_scores.items()},
            units={name: _Reduction.stack(table).transpose(1, 2) for name, table in out.unit_scores.items()},
            context_rc=_Reduction.stack(out.context_rc),
            self_rc=_Reduction.stack(out.self_rc),
        )


def _scorer_name(scorer: SpanScorer) -> str:
    return getattr(scorer, "name", "") or type(scorer).__name__
