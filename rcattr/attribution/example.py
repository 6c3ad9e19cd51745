"""One prompt and answer laid out as token positions ([`Example`][rcattr.attribution.example.Example]), and the pieces it is built from: the
rendered and tokenized prompt with its context spans ([`Draft`][rcattr.attribution.example.Draft]) and the span layouts of the context and
of the answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import numpy as np
import torch
from captum.attr import TextTemplateInput, TextTokenInput
from transformers import DynamicCache

from rcattr.attribution.result import RCAttributionResult
from rcattr.options import GRANULARITIES, OUTPUT_GRANULARITIES
from rcattr.protocols import TokenizerLike
from rcattr.record.attributed import AttributedAnswer, AttributedContext, SentenceRows
from rcattr.record.signals import RCSignals
from rcattr.text.documents import Document
from rcattr.text.prompting import Prompt
from rcattr.text.segmentation import (
    TextSpan,
    char_spans,
    sentence_spans,
    token_ranges,
    token_spans,
    whole_span,
)

SpanSpec: TypeAlias = str | Sequence[tuple[int, int]]


@dataclass(frozen=True)
class Example:
    """One prompt and answer, with the context spans and output units as token positions.

    Attributes
    ----------
    prompt : Prompt
    answer : str
    ids : Tensor of long, shape [1, S]
        Prompt ⊕ answer token ids, on the model's device.
    answer_start : int
        Position of the first answer token.
    context_spans : list of TextSpan
    context_ranges : list of list of int
        Prompt positions of each context span's tokens.
    output_spans : list of TextSpan
        The output units, as character spans of the answer.
    unit_ranges : list of range
        Answer-token indices (0 = first answer token) of each output unit.
    answer_tokens : list of TextSpan
    answer_sentences : list of range
        Answer-token indices of each sentence of the answer (where an attention scorer's
        continuation stops).
    prompt_cache : transformers.DynamicCache or None
        When the answer was generated here: the generation's KV cache, whose first `answer_start`
        positions are the prompt's. A method that runs the prompt may continue from it instead
        ([`prompt_cache_for`][rcattr.attribution.example.Example.prompt_cache_for]), so that explaining a generated answer does not run the prompt twice.
    sentence_units : int
        How many of the last output units are the answer's sentences, added for citations to a whole-answer
        unit ([`result`][rcattr.attribution.example.Example.result] keeps them apart, as the result's `sentence_rows`); 0 otherwise.
    """

    prompt: Prompt
    answer: str
    ids: torch.Tensor
    answer_start: int
    context_spans: list[TextSpan]
    context_ranges: list[list[int]]
    output_spans: list[TextSpan]
    unit_ranges: list[range]
    answer_tokens: list[TextSpan]
    answer_sentences: list[range]
    prompt_cache: DynamicCache | None = None
    sentence_units: int = 0

    @property
    def n_answer(self) -> int:
        return self.ids.shape[1] - self.answer_start

    def prompt_cache_for(self) -> DynamicCache | None:
        """The generation's cache cut back to the prompt, ready for the answer's forward; None if there is none."""
        cache = self.prompt_cache
        if cache is None:
            return None
        extra = cache.get_seq_length() - self.answer_start
        if extra:
            cache.crop(-extra)  # a negative length removes that many tokens in every transformers release
        return cache

    def result(
        self,
        seq_attr: torch.Tensor,
        token_attr: torch.Tensor,
        method: str,
        inp: Any = None,
        rc: RCSignals | None = None,
    ) -> RCAttributionResult:
        """The result for `[n_spans]` answer scores and `[n_outputs, n_spans]` unit scores (and an RC method's
        signals); a span without a token (an empty document's) scores 0 whatever the method gave it. The rows
        of the sentence units (`sentence_units`) and their context reliance become the result's
        `sentence_rows`."""
        tokenless = torch.tensor([len(r) == 0 for r in self.context_ranges])
        token_attr = token_attr.detach().float().cpu().masked_fill(tokenless, 0.0)
        units = len(self.output_spans) - self.sentence_units
        sentence_rows = None
        if self.sentence_units and len(token_attr) == len(self.output_spans):  # (a method may score fewer)
            reliance = None if rc is None else rc.unit_context_reliance
            sentence_rows = SentenceRows(
                self.output_spans[units:], token_attr[units:], None if reliance is None else reliance[units:]
            )
            if rc is not None:
                rc = replace(rc, unit_context_reliance=rc.unit_context_reliance[:units])
        return RCAttributionResult(
            seq_attr.detach().float().cpu().masked_fill(tokenless, 0.0),
            token_attr[:units],
            context=AttributedContext(
                self.prompt.documents or [Document(chunk) for chunk in self.prompt.chunks],
                self.context_spans,
                self.prompt.evidence if self.prompt.evidence is not None else [self.prompt.text],
            ),
            output=AttributedAnswer(
                self.answer, self.output_spans[:units], self.answer_tokens, sentence_rows
            ),
            span_scorer=method,
            rc=rc,
            inp=inp if isinstance(inp, (TextTemplateInput, TextTokenInput)) else None,
        )


@dataclass(frozen=True)
class Draft:
    """A rendered and tokenized prompt with its context spans, before its answer is known."""

    prompt: Prompt
    ids: list[int]
    context_spans: list[TextSpan]
    context_ranges: list[list[int]]


def context_spans(
    prompt: Prompt, offsets: np.ndarray, granularity: SpanSpec
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
                for index, (chunk, start) in enumerate(zip(prompt.chunks, prompt.chunk_starts, strict=True))
                for span in token_spans(offsets, start, start + len(chunk), chunk, source=index)
            ]
    else:
        if len(prompt.chunks) != 1:
            raise ValueError(
                "character spans as granularity need a single context string, not a list of chunks"
            )
        spans = given_spans(prompt.chunks[0], granularity, "granularity")
    return spans, list(token_ranges(spans, offsets, prompt.chunk_starts))


def sink_before_context(
    ids: list[int], context_ranges: Sequence[Sequence[int]], tokenizer: TokenizerLike
) -> tuple[list[int], list[list[int]]]:
    """The prompt's ids and context spans' positions with a token in front that is not context.

    A model's first position draws much of every head's attention whatever token it holds (the attention
    sink), so a context span there would take most of the attribution: with captum's `TextTokenInput` of a
    plain sentence, its first word got 0.6 of it on SmolLM2. A `ContextInput` always has a template
    or instruction there; a captum input whose first token is a feature gets the tokenizer's BOS token (else
    its EOS token, as GPT-2 and Qwen2 use between documents) in front, as Llama's tokenizers add themselves.
    """
    ranges = [list(r) for r in context_ranges]
    if not any(0 in r for r in ranges):
        return ids, ranges
    sink = next((t for t in (tokenizer.bos_token_id, tokenizer.eos_token_id) if t is not None), None)
    if sink is None:
        raise ValueError(
            "the prompt's first token is part of the context, where the model's attention sink would take the "
            "attribution, and the tokenizer has no BOS or EOS token to put in front: start the input with a "
            "token that is not a feature (captum's skip_tokens) or use ContextInput"
        )
    return [int(sink), *ids], [[position + 1 for position in r] for r in ranges]


def answer_spans(answer: str, offsets: np.ndarray, spec: SpanSpec) -> list[TextSpan]:
    if not isinstance(spec, str):
        return given_spans(answer, spec, "output_granularity")
    if spec not in OUTPUT_GRANULARITIES:
        raise ValueError(
            f"unknown output_granularity {spec!r}; choose one of {list(OUTPUT_GRANULARITIES)} or give (start, end) spans"
        )
    if spec == "answer":
        return [whole_span(answer)]
    if spec == "sentence":
        return sentence_spans(answer)
    return token_spans(offsets, 0, len(answer), answer)


def given_spans(text: str, bounds: Sequence[tuple[int, int]], argument: str) -> list[TextSpan]:
    try:
        return char_spans(text, bounds)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{argument}: {error}") from None
