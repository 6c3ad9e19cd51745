"""What every attribution method shares: from an input and an answer to spans, tokens and a result.

:class:`SpanAttributor` renders the prompt, tokenizes it with character offsets, generates the
answer when none is given, and lays out the context spans and output units as token positions
(:class:`Example`). A method only scores: :meth:`SpanAttributor._explain` turns an example into
``[n_spans]`` scores for the whole answer and ``[n_outputs, n_spans]`` per output unit. RC and
every baseline in :mod:`rcattr.baselines` share this path, so they see the same spans and the same
tokens and return the same :class:`~rcattr.result.RCAttributionResult`.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

import numpy as np
import torch
from captum.attr import TextTemplateInput, TextTokenInput
from transformers import DynamicCache, PreTrainedModel

from rcattr._compat import cache_argument
from rcattr._typing import TokenizerLike
from rcattr.options import GRANULARITIES, OUTPUT_GRANULARITIES
from rcattr.prompting import ContextInput, Prompt, check_text, render_prompt
from rcattr.result import RCAttributionResult
from rcattr.segmentation import (
    TextSpan,
    char_spans,
    sentence_spans,
    token_ranges,
    token_spans,
    whole_span,
)

AttributionInput: TypeAlias = ContextInput | TextTemplateInput | TextTokenInput | str
SpanSpec: TypeAlias = str | Sequence[tuple[int, int]]

DEFAULT_GEN_ARGS: dict[str, Any] = {"max_new_tokens": 128, "do_sample": False}


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
        When the answer was generated here: the generation's KV cache, whose first ``answer_start``
        positions are the prompt's. A method that runs the prompt may continue from it instead
        (:meth:`prompt_cache_for`), so that explaining a generated answer does not run the prompt twice.
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
        self, seq_attr: torch.Tensor, token_attr: torch.Tensor, method: str, inp: Any = None, **extra: Any
    ) -> RCAttributionResult:
        """The result for ``[n_spans]`` answer scores and ``[n_outputs, n_spans]`` unit scores."""
        return RCAttributionResult(
            seq_attr=seq_attr.detach().float().cpu(),
            token_attr=token_attr.detach().float().cpu(),
            context_spans=self.context_spans,
            output_spans=self.output_spans,
            chunks=self.prompt.chunks,
            answer=self.answer,
            answer_tokens=self.answer_tokens,
            span_scorer=method,
            inp=inp if isinstance(inp, (TextTemplateInput, TextTokenInput)) else None,
            **extra,
        )


class SpanAttributor(ABC):
    """Base of every attribution method: ``attribute(inp, target)`` -> scores per context span.

    Subclasses set :attr:`name` and implement :meth:`_explain`, usually as
    ``example.result(seq_attr, token_attr, self.name, inp)``.
    """

    name: ClassVar[str]

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(
                f"{type(self).__name__} needs a fast tokenizer (character offsets); load it with use_fast=True"
            )
        self.model = model
        self.tokenizer = tokenizer

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
        example = self.prepare(inp, target, granularity, output_granularity, gen_args)
        return self._explain(example, inp)

    @abstractmethod
    def _explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        """The result for one prepared example: higher scores mean more attributed."""

    def prepare(
        self,
        inp: AttributionInput,
        target: str | None = None,
        granularity: SpanSpec = "sentence",
        output_granularity: SpanSpec = "answer",
        gen_args: Mapping[str, Any] | None = None,
    ) -> Example:
        """Render, tokenize, generate if needed, and lay out spans and output units."""
        prompt = render_prompt(self.tokenizer, inp)
        prompt_ids, prompt_offsets = self._tokenize_prompt(prompt)
        context_spans, context_ranges = _context_spans(prompt, prompt_offsets, granularity)
        if isinstance(output_granularity, str) and output_granularity not in OUTPUT_GRANULARITIES:
            raise ValueError(
                f"unknown output_granularity {output_granularity!r}; choose one of {list(OUTPUT_GRANULARITIES)} "
                "or give (start, end) spans"
            )
        window = getattr(self.model.config.get_text_config(), "max_position_embeddings", None)
        if window is not None and len(prompt_ids) >= window:
            raise ValueError(
                f"the prompt ({len(prompt_ids)} tokens) leaves no room for an answer in the model's window of "
                f"{window} positions; shorten the context"
            )
        answer, cache = self._answer(prompt_ids, target, gen_args, window)
        encoded = self.tokenizer(answer, add_special_tokens=False, return_offsets_mapping=True)
        answer_ids = list(encoded["input_ids"])
        answer_offsets = np.asarray(encoded["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        total = len(prompt_ids) + len(answer_ids)
        if window is not None and total > window:
            raise ValueError(
                f"prompt ({len(prompt_ids)} tokens) + answer ({len(answer_ids)} tokens) = {total} tokens exceeds "
                f"the model's window of {window} positions"
            )
        output_spans = _answer_spans(answer, answer_offsets, output_granularity)
        return Example(
            prompt=prompt,
            answer=answer,
            ids=torch.tensor([prompt_ids + answer_ids], device=self.model.device),
            answer_start=len(prompt_ids),
            context_spans=context_spans,
            context_ranges=[list(r) for r in context_ranges],
            output_spans=output_spans,
            unit_ranges=list(token_ranges(output_spans, answer_offsets, [0])),
            answer_tokens=token_spans(answer_offsets, 0, len(answer), answer),
            answer_sentences=list(token_ranges(sentence_spans(answer), answer_offsets, [0])),
            prompt_cache=cache,
        )

    def _tokenize_prompt(self, prompt: Prompt) -> tuple[list[int], np.ndarray]:
        if prompt.token_ids is not None and prompt.token_offsets is not None:
            return prompt.token_ids, np.asarray(prompt.token_offsets, dtype=np.int64).reshape(-1, 2)
        encoded = self.tokenizer(
            prompt.text, add_special_tokens=prompt.add_special_tokens, return_offsets_mapping=True
        )
        offsets = np.asarray(encoded["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        return list(encoded["input_ids"]), offsets

    def _answer(
        self,
        prompt_ids: list[int],
        target: str | None,
        gen_args: Mapping[str, Any] | None,
        window: int | None,
    ) -> tuple[str, DynamicCache | None]:
        """The answer, and the cache of its generation when it was generated with one sequence."""
        cache = None
        if target is None:
            ids = torch.tensor([prompt_ids], device=self.model.device)
            options = {**DEFAULT_GEN_ARGS, **(gen_args or {})}
            sequences = options.get("num_return_sequences", self.model.generation_config.num_return_sequences)
            if sequences not in (None, 1):
                raise ValueError(
                    f"gen_args: num_return_sequences={sequences!r}, but rcattr explains one answer; leave it at 1 "
                    "(with num_beams > 1 the best beam is the answer)"
                )
            if options.get("num_beams", 1) == 1 and not {"past_key_values", "cache"} & set(options):
                cache = DynamicCache()
                options.update(cache_argument(self.model, cache))
            room = None if window is None else window - len(prompt_ids)
            if room is not None and options.get("max_new_tokens", 0) > room:
                warnings.warn(
                    f"max_new_tokens={options['max_new_tokens']} lowered to {room}: the prompt takes "
                    f"{len(prompt_ids)} of the model's {window} positions",
                    stacklevel=4,
                )
                options["max_new_tokens"] = room
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
        else:
            check_text("target", target)
        if not target.strip():
            raise ValueError("target is empty; give the answer to explain, or None to generate it")
        return target, cache


def unit_sum(per_token: torch.Tensor, unit_ranges: Sequence[range]) -> torch.Tensor:
    """``[A, ...]`` per-answer-token values summed over each output unit: ``[U, ...]``."""
    return torch.stack([per_token[list(rows)].sum(0) for rows in unit_ranges])


def span_sum(per_position: torch.Tensor, context_ranges: Sequence[Sequence[int]]) -> torch.Tensor:
    """``[..., P]`` per-prompt-position values summed over each context span: ``[..., n_spans]``."""
    return torch.stack([per_position[..., list(r)].sum(-1) for r in context_ranges], dim=-1)


def _context_spans(
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
        spans = _given_spans(prompt.chunks[0], granularity, "granularity")
    return spans, list(token_ranges(spans, offsets, prompt.chunk_starts))


def _answer_spans(answer: str, offsets: np.ndarray, spec: SpanSpec) -> list[TextSpan]:
    if not isinstance(spec, str):
        return _given_spans(answer, spec, "output_granularity")
    if spec not in OUTPUT_GRANULARITIES:
        raise ValueError(
            f"unknown output_granularity {spec!r}; choose one of {list(OUTPUT_GRANULARITIES)} or give (start, end) spans"
        )
    if spec == "answer":
        return [whole_span(answer)]
    if spec == "sentence":
        return sentence_spans(answer)
    return token_spans(offsets, 0, len(answer), answer)


def _given_spans(text: str, bounds: Sequence[tuple[int, int]], argument: str) -> list[TextSpan]:
    try:
        return char_spans(text, bounds)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{argument}: {error}") from None


def normalise(scores: torch.Tensor) -> torch.Tensor:
    """Scores over the last dim divided by their sum (paper Eq. 7); all-zero rows stay zero."""
    total = scores.sum(-1, keepdim=True)
    return scores / torch.where(total > 0, total, torch.ones_like(total))
