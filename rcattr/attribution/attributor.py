"""RCAttributor: attribute an answer to its context from one forward pass (RCStat §5, docs/design.md §2).

One teacher-forced forward over prompt ⊕ answer (a generated answer continues from its generation's
cache, so the prompt runs once) reduces each layer's raw logits to a score per head as soon as they
are computed ([`rcattr.attribution.reduction`][rcattr.attribution.reduction]). A head selector ([`rcattr.heads.selectors`][rcattr.heads.selectors]) then chooses heads
from those scores, and only for them are the logits recomputed from the queries and keys the pass kept,
to give (1) per-head span scores for the whole answer and for each output unit and (2) per answer token
the context-versus-self contextualization behind `groundedness`. Their span scores are summed and
normalised over spans (paper Eq. 7).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import torch
from transformers import PreTrainedModel

from rcattr.attribution.base import AttributionInput, Example, SpanAttributor
from rcattr.attribution.fusion import LexicalFusion
from rcattr.attribution.reduction import Layout, Reducer, Reduction, forward, forward_batch
from rcattr.attribution.result import RCAttributionResult
from rcattr.attribution.scorers import AttentionScorer, SpanScorer, scorer_name
from rcattr.attribution.token_signals import token_signals
from rcattr.attribution.voting import HeadEvidence, HeadVote, HeadVotes, Voted
from rcattr.heads.scores import HeadScore
from rcattr.heads.selection import HeadSelection
from rcattr.heads.selectors import HeadSelector, OutlierHeads, TopHeads
from rcattr.protocols import TokenizerLike
from rcattr.runtime.attention import check_supported

if TYPE_CHECKING:
    from rcattr.grounding.probe import SupportProbe

NO_SCORES = (
    "no selected head sees the context from the answer (sliding windows shorter than the distance?); every "
    "span scores 0"
)


def result_notes(selection: HeadSelection, seq_attr: torch.Tensor) -> tuple[str, ...]:
    """What a result's attributor warns of ([`RCSignals.notes`][rcattr.record.signals.RCSignals.notes]): few heads
    that see the whole context ([`HeadSelection.reach_note`][rcattr.heads.selection.HeadSelection.reach_note]), and `[n_spans]` scores that are all 0."""
    notes = [str(selection.reach_note())] if selection.few_seeing else []
    return (*notes, *([] if bool((seq_attr > 0).any()) else [NO_SCORES]))


class RCAttributor(SpanAttributor):
    """Attribute an answer to context spans with relative contextualization (RCStat).

    The defaults are the recipe that measured best on both dev files and on a second architecture
    (`docs/benchmarks/attribution.md`, whose ablation also keeps the levers that lost); [`paper`][rcattr.attribution.attributor.RCAttributor.paper] builds the
    paper's recipe.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM with sdpa or eager attention (Llama, Mistral, Qwen2/3, Gemma3,
        Phi3, ...).
    tokenizer : transformers.PreTrainedTokenizerFast
        Its fast tokenizer (character offsets are needed).
    heads : HeadSelector, optional
        Which heads' span scores count, and the score they are ranked by ([`rcattr.heads.selectors`][rcattr.heads.selectors]):
        `OutlierHeads()` (None, the default), the heads whose score stands more than two standard deviations
        above the mean of all heads for this example (about 19 of SmolLM2's 270 heads, 3 of Gemma-3-270m's 72;
        a selection of fewer than 5% of the model's heads is flagged:
        `result.head_selection.few_heads`); `TopHeads(k)`, a number or a fraction of all heads;
        `FixedHeads([(layer, head), ...])`. Each takes
        `score=` `"superiority"` (`P(X > Y)`, default), `"rc_std"` (`E[Z] / std(Y)`) or
        `"rc"` (the paper's raw `E[Z]`). Heads are chosen among those whose attention reaches the whole
        context from the answer: on a model with sliding-window or chunked layers (Gemma 2 and 3, Mistral,
        Qwen2 with `use_sliding_window`), a head whose window stops short of the documents has no evidence
        about them and does not vote (`result.head_selection.reach` holds each layer's view of the context,
        `.seeing` how many heads see all of it; none or few warn).
    span_scorer : SpanScorer, optional
        How a selected head scores a span: post-softmax attention mass, `AttentionScorer()` (None, the default;
        [`AttentionScorer`][rcattr.attribution.scorers.AttentionScorer] carries each unit's evidence on over the
        answer rows that follow it), or a scorer of your own (docs/extending.md).
    votes : {"share", "mass"} or HeadVote, default "share"
        How the selected heads' span scores add up: each head's share over the spans (`"share"`), so that a
        head that attends more does not outvote the others, or their mass (`"mass"`, paper Eq. 7); or a vote
        strategy ([`HeadVote`][rcattr.attribution.voting.HeadVote], [`LexicalFusion`][rcattr.attribution.fusion.LexicalFusion]).
    lexical : bool, optional
        Vote with `LexicalFusion` (`rcattr.attribution.fusion`), the default: where the selected heads disagree
        on a unit's top span, BM25 fills the disagreeing share of the vote; where they agree the vote is theirs
        alone (`result.lexical_share` says how much BM25 filled). It wins or ties against the heads' vote
        alone in all twelve cells of three models × two files × short and 8k contexts and on the held-out
        runs, and keeps the default from falling below BM25 where the heads fail (Qwen2 at 8k;
        docs/benchmarks/long-contexts.md). `lexical=False`: the model's own account alone, the heads' vote. With `votes` a
        `HeadVote` object, that object is the vote (False unless given).
    probe : SupportProbe, "shipped" or None, default "shipped"
        The support probe whose verdict every citation's `status` gives (`rcattr.grounding.verdict`):
        `"shipped"`, the one fitted on AttributionBench for this model where there is one
        (`SupportProbe.shipped`: SmolLM2-135M-Instruct, Gemma-3-270m, Qwen2.5-Coder-0.5B-Instruct); a probe of
        your own (`SupportProbe.fit`, checked against the model); None, the unsupervised status from token
        support. With a probe the pass also keeps every head's lookback ratio and peak for it.

    Notes
    -----
    The per-token signals (`result.rc`: groundedness and lookback on the selected heads, token support on
    its own 20 best heads, [`RCSignals.support_heads`][rcattr.record.signals.RCSignals]) are
    measured apart from the vote ([`token_signals`][rcattr.attribution.token_signals.token_signals]).

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
    batch_forward: ClassVar[bool] = True
    """Whether [`explain_batch`][rcattr.attribution.attributor.RCAttributor.explain_batch] may run one left-padded
    forward for a batch: a subclass whose [`run_pass`][rcattr.attribution.attributor.RCAttributor.run_pass] gathers
    more than `Reducer` does sets it False."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        heads: HeadSelector | None = None,
        span_scorer: SpanScorer | None = None,
        *,
        votes: HeadVotes | HeadVote = "share",
        lexical: bool | None = None,
        probe: SupportProbe | Literal["shipped"] | None = "shipped",
    ) -> None:
        from rcattr.grounding.probe import SupportProbe, model_identity

        super().__init__(model, tokenizer)
        check_supported(model)
        if probe == "shipped":
            self.probe = SupportProbe.shipped(model)
        elif probe is None or isinstance(probe, SupportProbe):
            if probe is not None:
                probe.check(model_identity(model))
            self.probe = probe
        else:
            raise ValueError(f"probe={probe!r}: give a SupportProbe, 'shipped' or None")
        #: Whether the pass keeps every head's lookback ratio and peak (`RCSignals.head_lookback`): with a probe,
        #: which reads them; `rcattr.attribution.claim_checks.claim_features` sets it on a copy to fit one.
        self.keep_head_rows = self.probe is not None
        if lexical is None:
            lexical = not isinstance(votes, HeadVote)
        elif isinstance(votes, HeadVote) and lexical:
            raise ValueError(
                f"lexical=True makes the vote a LexicalFusion; with votes={votes!r} give LexicalFusion(...) itself"
            )
        if heads is not None and not isinstance(heads, HeadSelector):
            raise ValueError(
                f"heads={heads!r}: give a HeadSelector, e.g. OutlierHeads(), TopHeads(20) or "
                "FixedHeads([(layer, head), ...])"
            )
        if span_scorer is not None and not isinstance(span_scorer, SpanScorer):
            raise ValueError(
                f"span_scorer={span_scorer!r}: give a SpanScorer, e.g. AttentionScorer() (the default); the paper's "
                "RC-expectation scorers are rcattr.eval.attribution.rc_span_scorers'"
            )
        self.scorer = AttentionScorer() if span_scorer is None else span_scorer
        self.voting = (
            votes if isinstance(votes, HeadVote) else (LexicalFusion if lexical else HeadVote)(votes)
        )
        config = model.config.get_text_config()
        self.n_layers, self.n_heads = config.num_hidden_layers, config.num_attention_heads
        self.heads = (OutlierHeads() if heads is None else heads).for_model(self.n_layers, self.n_heads)

    @classmethod
    def paper(cls, model: PreTrainedModel, tokenizer: TokenizerLike, **overrides: Any) -> RCAttributor:
        """The paper's recipe (RCStat §5.2): attention over the top-20 heads, each unit's own rows,
        heads summed by mass, no lexical fusion. Heads are ranked by the scale-free P(X > Y) as everywhere in rcattr
        (`TopHeads(20, score="rc")` gives the paper's raw E[Z]); `overrides` change any argument."""
        recipe: dict[str, Any] = {
            "span_scorer": AttentionScorer(continuation=0.0),
            "votes": "mass",
            "lexical": False,
        }
        if "heads" not in overrides:
            recipe["heads"] = TopHeads(20)
        return cls(model, tokenizer, **{**recipe, **overrides})

    @property
    def votes(self) -> HeadVotes:
        """How the selected heads' span scores add up: `"mass"` or `"share"` (the vote strategy's)."""
        return self.voting.votes

    @property
    def head_score(self) -> HeadScore:
        """How heads are ranked: the head selector's `score`."""
        return self.heads.score

    @property
    def scorer_name(self) -> str:
        return scorer_name(self.scorer)

    @property
    def result_label(self) -> str:
        """What a result's `span_scorer` names: the span scorer (the method, for a baseline built on this)."""
        return self.scorer_name

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        """The result of one prepared example: [`run_pass`][rcattr.attribution.attributor.RCAttributor.run_pass],
        [`select_heads`][rcattr.attribution.attributor.RCAttributor.select_heads] and
        [`span_scores`][rcattr.attribution.attributor.RCAttributor.span_scores], then the per-token signals."""
        return self._result(example, inp, self.run_pass(example, {self.scorer_name: self.scorer}))

    def explain_batch(
        self, examples: Sequence[Example], inputs: Sequence[AttributionInput]
    ) -> list[RCAttributionResult]:
        """One left-padded forward for the batch (`forward_batch`); unless
        [`batch_forward`][rcattr.attribution.attributor.RCAttributor.batch_forward] is False, when the examples are explained one by one."""
        if not self.batch_forward:
            return super().explain_batch(examples, inputs)
        reducers = [self._reducer(example, {self.scorer_name: self.scorer}) for example in examples]
        forward_batch(self.model, examples, reducers)
        # map adds no Python frame (a comprehension does before 3.12): _result warns at the caller
        return list(map(self._result, examples, inputs, reducers))

    def _result(self, example: Example, inp: AttributionInput, reducer: Reducer) -> RCAttributionResult:
        """The result of one example from its pass: the heads, their vote, then the per-token signals."""
        selection = self.select_heads(reducer)
        voted = self.span_scores(example, reducer, selection)
        notes = result_notes(selection, voted.seq_attr)
        for note in notes:
            warnings.warn(note, stacklevel=5)  # the caller of attribute() or attribute_many()
        signals = token_signals(
            example, reducer, selection, notes, voted.lexical_share, self.probe, self.keep_head_rows
        )
        return example.result(voted.seq_attr, voted.token_attr, self.result_label, inp, signals)

    def _evidence(self, reducer: Reducer, selection: HeadSelection) -> HeadEvidence:
        """The selected heads' answer and unit span scores by this attributor's span scorer."""
        out, name = reducer.out, self.scorer_name
        return HeadEvidence(
            out.gather(out.answer_scores[name], selection.heads),
            out.gather(out.unit_scores[name], selection.heads),
        )

    def _reducer(self, example: Example, scorers: Mapping[str, SpanScorer]) -> Reducer:
        """The deferred reduction of one example: every head's scores; span scores wait for
        [`span_scores`][rcattr.attribution.attributor.RCAttributor.span_scores]."""
        return Reducer(Layout.of(example), scorers, self.head_score, defer=True)

    def run_pass(self, example: Example, scorers: Mapping[str, SpanScorer]) -> Reducer:
        """The deferred pass of one example: every head's scores, span scores left for [`span_scores`][rcattr.attribution.attributor.RCAttributor.span_scores].

        The first of the three steps of [`explain`][rcattr.attribution.attributor.RCAttributor.explain] (pass, [`select_heads`][rcattr.attribution.attributor.RCAttributor.select_heads], [`span_scores`][rcattr.attribution.attributor.RCAttributor.span_scores]): a
        recipe that needs more of the pass overrides them (e.g. the benchmark's
        `rcattr.eval.attribution.recipes.RecipeAttributor`)."""
        reducer = self._reducer(example, scorers)
        forward(self.model, example, reducer)
        return reducer

    def select_heads(self, reducer: Reducer) -> HeadSelection:
        """The heads of this example, from every head's scores in the pass (the head selector's), among the heads
        whose attention reaches the whole context from the answer ([`rcattr.heads.scores.seeing_heads`][rcattr.heads.scores.seeing_heads])."""
        out = reducer.out
        return self.heads.select(Reduction.stack(out.head_scores[self.head_score]), out.reach())

    def span_scores(self, example: Example, reducer: Reducer, selection: HeadSelection) -> Voted:
        """The vote of the selected heads (`voting`): the `[n_spans]` answer and `[n_outputs, n_spans]`
        unit scores."""
        reducer.score_heads(selection.heads)
        return self.voting(example, self._evidence(reducer, selection), selection.weights)

    @torch.no_grad()
    def head_scores(
        self, inp: AttributionInput, target: str | None = None, *, gen_args: Mapping[str, Any] | None = None
    ) -> torch.Tensor:
        """`[layers, heads]` scores of every head for this example (the selector's `score`)."""
        example = self.prepare(inp, target, "chunk", "answer", gen_args)
        return Reduction.stack(self.run_pass(example, {}).out.head_scores[self.head_score])
