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
from typing import Any, TypeAlias

import numpy as np
import torch
from captum.attr import TextTemplateInput, TextTokenInput
from transformers import PreTrainedModel

from rcattr._typing import TokenizerLike
from rcattr.capture import CaptureStep, LogitCapture, check_supported
from rcattr.heads import HEAD_SCORES, HeadScore, fixed_heads, layer_rc, top_heads
from rcattr.prompting import ContextInput, Prompt, render_prompt
from rcattr.result import HeadSelection, RCAttributionResult
from rcattr.scorers import SpanScorer, make_span_scorer
from rcattr.segmentation import (
    GRANULARITIES,
    OUTPUT_GRANULARITIES,
    TextSpan,
    char_spans,
    sentence_spans,
    token_ranges,
    token_spans,
    whole_span,
)
from rcattr.spans import SpanBlock, SpanIndex

AttributionInput: TypeAlias = ContextInput | TextTemplateInput | TextTokenInput | str
SpanSpec: TypeAlias = str | Sequence[tuple[int, int]]

DEFAULT_GEN_ARGS: dict[str, Any] = {"max_new_tokens": 128, "do_sample": False}


@dataclass
class _Layout:
    """Where everything sits in the sequence of one example."""

    ids: torch.Tensor  # [1, S] prompt ⊕ answer
    answer_start: int  # first answer position
    context_keys: torch.Tensor  # [C] positions of the attributed context tokens
    spans: SpanIndex  # context spans over those C tokens
    unit_rows: torch.Tensor  # [U, R] answer-row index of each output unit, padded with 0
    unit_mask: torch.Tensor  # [U, R] bool, False on padding

    @property
    def n_answer(self) -> int:
        return self.ids.shape[1] - self.answer_start


@dataclass
class _Reduction:
    """Per-layer reductions, filled by :class:`_Reducer` during the forward."""

    head_scores: dict[int, torch.Tensor] = field(default_factory=dict)  # [H]
    answer_scores: dict[int, torch.Tensor] = field(default_factory=dict)  # [H, n_spans]
    unit_scores: dict[int, torch.Tensor] = field(default_factory=dict)  # [U, H, n_spans]
    context_rc: dict[int, torch.Tensor] = field(default_factory=dict)  # [H, A]: E[Z] per answer row
    self_rc: dict[int, torch.Tensor] = field(default_factory=dict)  # [H, A]: E[Z'] per answer row, same Y

    @staticmethod
    def stack(table: Mapping[int, torch.Tensor]) -> torch.Tensor:
        return torch.stack([table[layer] for layer in sorted(table)])


class _Reducer:
    """Reduces one layer's answer-row logits ``[1, H, A, S]`` as soon as the layer has run."""

    def __init__(self, layout: _Layout, scorer: SpanScorer | None, head_score: HeadScore) -> None:
        self.layout = layout
        self.scorer = scorer
        self.head_score = head_score
        self.out = _Reduction()
        self.answer_keys = torch.arange(layout.answer_start, layout.ids.shape[1], device=layout.ids.device)

    def __call__(self, logits: torch.Tensor, step: CaptureStep) -> None:
        layout, layer = self.layout, step.layer_idx
        logits, visible = logits[0], step.visible[0]  # [H, A, S], [A, S]
        cross = logits.index_select(-1, layout.context_keys)  # [H, A, C]
        cross_visible = visible.index_select(-1, layout.context_keys)
        own = logits.index_select(-1, self.answer_keys)  # [H, A, A]
        own_visible = visible.index_select(-1, self.answer_keys)
        statistics = layer_rc(cross, cross_visible, own, own_visible, self.head_score)
        self.out.head_scores[layer] = statistics.head_scores
        self.out.context_rc[layer] = statistics.context_rc
        self.out.self_rc[layer] = statistics.self_rc
        if self.scorer is None:
            return
        self.out.answer_scores[layer] = self.scorer.score(self._block(logits[None], visible[None], step))[0]
        if layout.unit_rows.shape[0] > 1 or layout.unit_rows.shape[1] != layout.n_answer:
            rows = layout.unit_rows
            unit_logits = logits[:, rows].transpose(0, 1)  # [U, H, R, S]
            unit_visible = visible[rows] & layout.unit_mask[..., None]
            self.out.unit_scores[layer] = self.scorer.score(self._block(unit_logits, unit_visible, step))
        else:
            self.out.unit_scores[layer] = self.out.answer_scores[layer][None]

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


class RCAttributor:
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
        How a selected head scores a span: post-softmax attention mass (best on QuoteSum, DESIGN §2),
        expected RC, or its upper bound.
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
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(
                "RCAttributor needs a fast tokenizer (character offsets); load it with use_fast=True"
            )
        if head_score not in HEAD_SCORES:
            raise ValueError(f"unknown head_score {head_score!r}; choose one of {list(HEAD_SCORES)}")
        self.model = model
        self.tokenizer = tokenizer
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

    @torch.no_grad()
    def attribute(
        self,
        inp: AttributionInput,
        target: str | None = None,
        *,
        granularity: SpanSpec = "sentence",
        output_granularity: SpanSpec = "answer",
        gen_args: Mapping[str, Any] | None = None,
    ) -> RCAttributionResult:
        """Attribute ``target`` (or the model's greedy answer) to the spans of the context.

        Parameters
        ----------
        inp : str, ContextInput, captum TextTemplateInput or TextTokenInput
            The context (a string is a context without question). For captum inputs the features
            are the spans: the template's values (grouped by its mask) or the tokens.
        target : str, optional
            The answer to explain; None generates it greedily with ``gen_args`` first.
        granularity : {"sentence", "chunk", "token"} or sequence of (start, end), default "sentence"
            Context spans: sentences, whole chunks (documents), tokens, or character spans of a
            string context. Ignored for captum inputs, whose features are the spans.
        output_granularity : {"answer", "sentence", "token"} or sequence of (start, end), default "answer"
            One ``token_attr`` row per output unit: the whole answer, its sentences, its tokens, or
            character spans of the answer.
        gen_args : mapping, optional
            Extra ``generate`` arguments when ``target`` is None (default: greedy, 128 new tokens).

        Returns
        -------
        RCAttributionResult
            ``seq_attr [n_spans]`` for the whole answer, ``token_attr [n_outputs, n_spans]``.
        """
        prompt = render_prompt(self.tokenizer, inp)
        prompt_ids, prompt_offsets = self._tokenize_prompt(prompt)
        answer = self._answer(prompt_ids, target, gen_args)
        layout, context_spans, output_spans, answer_tokens = self._layout(
            prompt, prompt_ids, prompt_offsets, answer, granularity, output_granularity
        )
        reduction = self._forward(layout, self.scorer)
        selection = self._select(_Reduction.stack(reduction.head_scores))
        layers, heads = selection.heads.unbind(1)
        answer_scores = _Reduction.stack(reduction.answer_scores)[layers, heads].sum(0)  # [n_spans]
        unit_scores = _Reduction.stack(reduction.unit_scores)[layers, :, heads].sum(0)  # [U, n_spans]
        context_rc = _Reduction.stack(reduction.context_rc)[layers, heads].sum(0)  # [A]
        self_rc = _Reduction.stack(reduction.self_rc)[layers, heads].sum(0)
        if not bool((answer_scores > 0).any()):
            warnings.warn(
                "no selected head sees the context from the answer (sliding windows shorter than the "
                "distance?); every span scores 0",
                stacklevel=2,
            )
        return RCAttributionResult(
            seq_attr=_normalise(answer_scores).float().cpu(),
            token_attr=_normalise(unit_scores).float().cpu(),
            context_spans=context_spans,
            output_spans=output_spans,
            chunks=prompt.chunks,
            answer=answer,
            answer_tokens=answer_tokens,
            groundedness=(context_rc / (context_rc + self_rc).clamp_min(1e-30)).float().cpu(),
            head_selection=selection,
            span_scorer=self.scorer.name or type(self.scorer).__name__,
            inp=inp if isinstance(inp, (TextTemplateInput, TextTokenInput)) else None,
        )

    @torch.no_grad()
    def head_scores(
        self, inp: AttributionInput, target: str | None = None, *, gen_args: Mapping[str, Any] | None = None
    ) -> torch.Tensor:
        """``[layers, heads]`` scores of every head for this example (``head_score`` kind)."""
        prompt = render_prompt(self.tokenizer, inp)
        prompt_ids, prompt_offsets = self._tokenize_prompt(prompt)
        answer = self._answer(prompt_ids, target, gen_args)
        layout = self._layout(prompt, prompt_ids, prompt_offsets, answer, "chunk", "answer")[0]
        return _Reduction.stack(self._forward(layout, None).head_scores)

    def _select(self, scores: torch.Tensor) -> HeadSelection:
        if self.heads is not None:
            return HeadSelection(scores.cpu(), self.heads, "fixed")
        return HeadSelection(
            scores.cpu(), top_heads(scores, self.top_k, bottom=self.bottom).cpu(), self.head_score
        )

    def _forward(self, layout: _Layout, scorer: SpanScorer | None) -> _Reduction:
        reducer = _Reducer(layout, scorer, self.head_score)
        with LogitCapture(self.model, reducer, query_positions=slice(layout.answer_start, None)):
            self.model(layout.ids, logits_to_keep=1)  # no vocabulary logits: only the captured rows matter
        return reducer.out

    def _tokenize_prompt(self, prompt: Prompt) -> tuple[list[int], np.ndarray]:
        if prompt.token_ids is not None and prompt.token_offsets is not None:
            return prompt.token_ids, np.asarray(prompt.token_offsets, dtype=np.int64).reshape(-1, 2)
        encoded = self.tokenizer(
            prompt.text, add_special_tokens=prompt.add_special_tokens, return_offsets_mapping=True
        )
        return list(encoded["input_ids"]), np.asarray(encoded["offset_mapping"], dtype=np.int64).reshape(
            -1, 2
        )

    def _answer(self, prompt_ids: list[int], target: str | None, gen_args: Mapping[str, Any] | None) -> str:
        if target is None:
            ids = torch.tensor([prompt_ids], device=self.model.device)
            options = {**DEFAULT_GEN_ARGS, **(gen_args or {})}
            generated = self.model.generate(  # type: ignore[operator]  # transformers types generate's decorator badly
                ids, attention_mask=torch.ones_like(ids), pad_token_id=self.tokenizer.eos_token_id, **options
            )
            target = str(
                self.tokenizer.decode(generated[0, ids.shape[1] :], skip_special_tokens=True)
            ).strip()
            if not target:
                raise RuntimeError(
                    "the model generated an empty answer; pass target= to explain a given answer"
                )
        elif not isinstance(target, str):
            raise TypeError(f"target must be the answer string or None, got {type(target).__name__}")
        if not target.strip():
            raise ValueError("target is empty; give the answer to explain, or None to generate it")
        return target

    def _layout(
        self,
        prompt: Prompt,
        prompt_ids: list[int],
        prompt_offsets: np.ndarray,
        answer: str,
        granularity: SpanSpec,
        output_granularity: SpanSpec,
    ) -> tuple[_Layout, list[TextSpan], list[TextSpan], list[TextSpan]]:
        encoded = self.tokenizer(answer, add_special_tokens=False, return_offsets_mapping=True)
        answer_ids = list(encoded["input_ids"])
        answer_offsets = np.asarray(encoded["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        total = len(prompt_ids) + len(answer_ids)
        window = getattr(self.model.config.get_text_config(), "max_position_embeddings", None)
        if window is not None and total > window:
            raise ValueError(
                f"prompt ({len(prompt_ids)} tokens) + answer ({len(answer_ids)} tokens) = {total} tokens exceeds "
                f"the model's window of {window} positions"
            )
        context_spans, context_ranges = self._context_spans(prompt, prompt_offsets, granularity)
        answer_tokens = token_spans(answer_offsets, 0, len(answer), answer)
        output_spans = _answer_spans(answer, answer_offsets, output_granularity)
        unit_ranges = token_ranges(output_spans, answer_offsets, [0])

        device = self.model.device
        context_keys = sorted({token for token_range in context_ranges for token in token_range})
        where = {token: index for index, token in enumerate(context_keys)}
        spans = SpanIndex.from_ranges([[where[t] for t in r] for r in context_ranges], device=device)
        width = max(len(r) for r in unit_ranges)
        unit_rows = torch.zeros(len(unit_ranges), width, dtype=torch.long)
        unit_mask = torch.zeros(len(unit_ranges), width, dtype=torch.bool)
        for unit, rows in enumerate(unit_ranges):
            unit_rows[unit, : len(rows)] = torch.as_tensor(list(rows))
            unit_mask[unit, : len(rows)] = True
        layout = _Layout(
            ids=torch.tensor([prompt_ids + answer_ids], device=device),
            answer_start=len(prompt_ids),
            context_keys=torch.tensor(context_keys, dtype=torch.long, device=device),
            spans=spans,
            unit_rows=unit_rows.to(device),
            unit_mask=unit_mask.to(device),
        )
        return layout, context_spans, output_spans, answer_tokens

    def _context_spans(
        self, prompt: Prompt, offsets: np.ndarray, granularity: SpanSpec
    ) -> tuple[list[TextSpan], list[Sequence[int]]]:
        """The context spans and, for each, the prompt tokens it owns."""
        if prompt.features is not None:  # captum input: its features are the spans
            chunk_spans = [whole_span(chunk, index) for index, chunk in enumerate(prompt.chunks)]
            if prompt.feature_tokens is not None:  # TextTokenInput: one feature per kept token
                return chunk_spans, [[token] for token in prompt.feature_tokens]
            ranges = token_ranges(chunk_spans, offsets, prompt.chunk_starts)
            spans = [
                chunk_spans[group[0]]
                if len(group) == 1
                else TextSpan(
                    0, len(prompt.chunks[group[0]]), " ".join(prompt.chunks[i] for i in group), group[0]
                )
                for group in prompt.features
            ]
            return spans, [sorted({t for i in group for t in ranges[i]}) for group in prompt.features]
        if isinstance(granularity, str):
            if granularity not in GRANULARITIES:
                raise ValueError(
                    f"unknown granularity {granularity!r}; choose one of {list(GRANULARITIES)} or give (start, end) spans"
                )
            if granularity == "chunk":
                spans = [whole_span(chunk, index) for index, chunk in enumerate(prompt.chunks)]
            elif granularity == "sentence":
                spans = [
                    span for index, chunk in enumerate(prompt.chunks) for span in sentence_spans(chunk, index)
                ]
            else:
                spans = [
                    span
                    for index, (chunk, start) in enumerate(
                        zip(prompt.chunks, prompt.chunk_starts, strict=True)
                    )
                    for span in token_spans(offsets, start, start + len(chunk), chunk, source=index)
                ]
        else:
            if len(prompt.chunks) != 1:
                raise ValueError(
                    "character spans as granularity need a single context string, not a list of chunks"
                )
            spans = char_spans(prompt.chunks[0], granularity)
        return spans, list(token_ranges(spans, offsets, prompt.chunk_starts))


def _answer_spans(answer: str, offsets: np.ndarray, spec: SpanSpec) -> list[TextSpan]:
    if not isinstance(spec, str):
        return char_spans(answer, spec)
    if spec not in OUTPUT_GRANULARITIES:
        raise ValueError(
            f"unknown output_granularity {spec!r}; choose one of {list(OUTPUT_GRANULARITIES)} or give (start, end) spans"
        )
    if spec == "answer":
        return [whole_span(answer)]
    if spec == "sentence":
        return sentence_spans(answer)
    return token_spans(offsets, 0, len(answer), answer)


def _normalise(scores: torch.Tensor) -> torch.Tensor:
    """Scores over the last dim divided by their sum (paper Eq. 7); all-zero rows stay zero."""
    total = scores.sum(-1, keepdim=True)
    return scores / torch.where(total > 0, total, torch.ones_like(total))
