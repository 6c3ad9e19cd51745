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
from typing import Any, ClassVar, TypeAlias, TypeGuard, cast

import numpy as np
import torch
from captum.attr import TextTemplateInput, TextTokenInput
from transformers import DynamicCache, PreTrainedModel

from rcattr import example as layout
from rcattr._compat import cache_argument
from rcattr._typing import TokenizerLike
from rcattr.example import Draft, Example, SpanSpec
from rcattr.options import OUTPUT_GRANULARITIES
from rcattr.prompting import ContextInput, Prompt, check_text, render_prompt
from rcattr.result import RCAttributionResult
from rcattr.segmentation import (
    sentence_spans,
    token_ranges,
    token_spans,
)

AttributionInput: TypeAlias = ContextInput | TextTemplateInput | TextTokenInput | str

DEFAULT_GEN_ARGS: dict[str, Any] = {"max_new_tokens": 128, "do_sample": False}


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

    @torch.no_grad()
    def attribute_many(
        self,
        inputs: Sequence[AttributionInput],
        targets: Sequence[str | None] | None = None,
        *,
        batch_size: int = 8,
        granularity: SpanSpec | Sequence[SpanSpec] = "sentence",
        output_granularity: SpanSpec | Sequence[SpanSpec] = "answer",
        gen_args: Mapping[str, Any] | None = None,
        progress: bool = True,
    ) -> list[RCAttributionResult]:
        """:meth:`attribute` for many inputs, ``batch_size`` at a time: the same results, in order.

        The answers of a batch that are not given are generated together (greedy, left-padded, no cache
        kept), and a method that can explain a batch at once does (:class:`~rcattr.RCAttributor` runs
        one left-padded forward per batch); the others explain its examples one by one.

        Parameters
        ----------
        inputs : sequence of str, ContextInput, captum TextTemplateInput or TextTokenInput
            One input per example, as :meth:`attribute` takes it.
        targets : sequence of str or None, optional
            One answer per input (None entries are generated); None generates them all.
        batch_size : int, default 8
            Examples prepared and explained together; a larger batch is faster per example on a GPU
            and needs memory for ``batch_size`` padded sequences.
        granularity, output_granularity : span spec, or a list of them, one per input
            As in :meth:`attribute`, for every input; a list whose items are each a name or a sequence
            of ``(start, end)`` pairs gives every input its own (e.g. the gold spans of each answer).
        gen_args : mapping, optional
            Extra ``generate`` arguments for the answers generated (``num_return_sequences`` stays 1).
        progress : bool, default True
            Show a progress bar over the examples.

        Returns
        -------
        list of RCAttributionResult
            ``results[i]`` equals ``attribute(inputs[i], targets[i], ...)``: ``seq_attr [n_spans_i]``,
            ``token_attr [n_outputs_i, n_spans_i]``.

        Examples
        --------
        >>> inputs = [ContextInput(docs, question) for docs, question in pairs]
        >>> results = attributor.attribute_many(inputs, answers, batch_size=16, granularity="chunk")
        >>> [result.top(1)[0][0].source for result in results]
        [0, 2, 1]
        """
        inputs = _sequence("inputs", inputs)
        targets = [None] * len(inputs) if targets is None else _sequence("targets", targets)
        if len(targets) != len(inputs):
            raise ValueError(
                f"targets has {len(targets)} entries for {len(inputs)} inputs; give one per input"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
        spans = _per_input(granularity, len(inputs), "granularity")
        units = _per_input(output_granularity, len(inputs), "output_granularity")
        from tqdm.auto import tqdm

        results: list[RCAttributionResult] = []
        with tqdm(total=len(inputs), desc=self.name, unit="example", disable=not progress) as bar:
            for start in range(0, len(inputs), batch_size):
                batch = slice(start, start + batch_size)
                examples = self._prepare_batch(
                    inputs[batch], targets[batch], spans[batch], units[batch], gen_args
                )
                results.extend(self._explain_batch(examples, inputs[batch]))
                bar.update(len(examples))
        return results

    @abstractmethod
    def _explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        """The result for one prepared example: higher scores mean more attributed."""

    def _explain_batch(
        self, examples: Sequence[Example], inputs: Sequence[AttributionInput]
    ) -> list[RCAttributionResult]:
        """The results of a batch of prepared examples: :meth:`_explain` of each, unless a method batches."""
        return list(map(self._explain, examples, inputs))

    def prepare(
        self,
        inp: AttributionInput,
        target: str | None = None,
        granularity: SpanSpec = "sentence",
        output_granularity: SpanSpec = "answer",
        gen_args: Mapping[str, Any] | None = None,
    ) -> Example:
        """Render, tokenize, generate if needed, and lay out spans and output units."""
        draft = self._draft(inp, granularity, output_granularity)
        answers, cache = self._answers([draft], [target], gen_args, keep_cache=True)
        return self._example(draft, answers[0], output_granularity, cache)

    def _prepare_batch(
        self,
        inputs: Sequence[AttributionInput],
        targets: Sequence[str | None],
        granularities: Sequence[SpanSpec],
        output_granularities: Sequence[SpanSpec],
        gen_args: Mapping[str, Any] | None,
    ) -> list[Example]:
        """:meth:`prepare` of each input, the missing answers generated together (no cache kept)."""
        drafts = [
            self._draft(inp, spec, units)
            for inp, spec, units in zip(inputs, granularities, output_granularities, strict=True)
        ]
        answers, _ = self._answers(drafts, targets, gen_args, keep_cache=False)
        return [
            self._example(draft, answer, units)
            for draft, answer, units in zip(drafts, answers, output_granularities, strict=True)
        ]

    def _draft(self, inp: AttributionInput, granularity: SpanSpec, output_granularity: SpanSpec) -> Draft:
        """The prompt of ``inp``, tokenized, with its context spans; refused when it fills the model's window."""
        prompt = render_prompt(self.tokenizer, inp)
        prompt_ids, prompt_offsets = self._tokenize_prompt(prompt)
        context_spans, context_ranges = layout.context_spans(prompt, prompt_offsets, granularity)
        prompt_ids, context_ranges = layout.sink_before_context(prompt_ids, context_ranges, self.tokenizer)
        if isinstance(output_granularity, str) and output_granularity not in OUTPUT_GRANULARITIES:
            raise ValueError(
                f"unknown output_granularity {output_granularity!r}; choose one of {list(OUTPUT_GRANULARITIES)} "
                "or give (start, end) spans"
            )
        window = self._window
        if window is not None and len(prompt_ids) >= window:
            raise ValueError(
                f"the prompt ({len(prompt_ids)} tokens) leaves no room for an answer in the model's window of "
                f"{window} positions; shorten the context"
            )
        return Draft(prompt, prompt_ids, context_spans, context_ranges)

    def _example(
        self, draft: Draft, answer: str, output_granularity: SpanSpec, cache: DynamicCache | None = None
    ) -> Example:
        """The example of a prompt and its answer; refused when both exceed the model's window."""
        encoded = self.tokenizer(answer, add_special_tokens=False, return_offsets_mapping=True)
        answer_ids = list(encoded["input_ids"])
        answer_offsets = np.asarray(encoded["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        total, window = len(draft.ids) + len(answer_ids), self._window
        if window is not None and total > window:
            raise ValueError(
                f"prompt ({len(draft.ids)} tokens) + answer ({len(answer_ids)} tokens) = {total} tokens exceeds "
                f"the model's window of {window} positions"
            )
        output_spans = layout.answer_spans(answer, answer_offsets, output_granularity)
        return Example(
            prompt=draft.prompt,
            answer=answer,
            ids=torch.tensor([draft.ids + answer_ids], device=self.model.device),
            answer_start=len(draft.ids),
            context_spans=draft.context_spans,
            context_ranges=draft.context_ranges,
            output_spans=output_spans,
            unit_ranges=list(token_ranges(output_spans, answer_offsets, [0])),
            answer_tokens=token_spans(answer_offsets, 0, len(answer), answer),
            answer_sentences=list(token_ranges(sentence_spans(answer), answer_offsets, [0])),
            prompt_cache=cache,
        )

    @property
    def _window(self) -> int | None:
        """The model's window (``max_position_embeddings``), if it states one."""
        return getattr(self.model.config.get_text_config(), "max_position_embeddings", None)

    def _tokenize_prompt(self, prompt: Prompt) -> tuple[list[int], np.ndarray]:
        if prompt.token_ids is not None and prompt.token_offsets is not None:
            return prompt.token_ids, np.asarray(prompt.token_offsets, dtype=np.int64).reshape(-1, 2)
        encoded = self.tokenizer(
            prompt.text, add_special_tokens=prompt.add_special_tokens, return_offsets_mapping=True
        )
        offsets = np.asarray(encoded["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        return list(encoded["input_ids"]), offsets

    def _answers(
        self,
        drafts: Sequence[Draft],
        targets: Sequence[str | None],
        gen_args: Mapping[str, Any] | None,
        *,
        keep_cache: bool,
    ) -> tuple[list[str], DynamicCache | None]:
        """Each draft's answer: its target checked, or generated with the other missing ones in one batch;
        with ``keep_cache`` and one draft to generate, also the cache of its generation."""
        given = [None if target is None else _checked_target(target) for target in targets]
        prompts = [draft.ids for draft, answer in zip(drafts, given, strict=True) if answer is None]
        generated, cache = self._generate(prompts, gen_args, keep_cache) if prompts else ([], None)
        fresh = iter(generated)
        return [next(fresh) if answer is None else answer for answer in given], cache

    def _generate(
        self, prompts: Sequence[list[int]], gen_args: Mapping[str, Any] | None, keep_cache: bool
    ) -> tuple[list[str], DynamicCache | None]:
        """The greedy answers to ``prompts`` from one ``generate`` over them, left-padded; with ``keep_cache``,
        one prompt and one beam, also the generation's cache."""
        options = {**DEFAULT_GEN_ARGS, **(gen_args or {})}
        sequences = options.get("num_return_sequences", self.model.generation_config.num_return_sequences)
        if sequences not in (None, 1):
            raise ValueError(
                f"gen_args: num_return_sequences={sequences!r}, but rcattr explains one answer; leave it at 1 "
                "(with num_beams > 1 the best beam is the answer)"
            )
        cache = None
        if keep_cache and len(prompts) == 1 and options.get("num_beams", 1) == 1:
            if not {"past_key_values", "cache"} & set(options):
                cache = DynamicCache()
                options.update(cache_argument(self.model, cache))
        width, window = max(map(len, prompts)), self._window
        room = None if window is None else window - width
        if room is not None and options.get("max_new_tokens", 0) > room:
            warnings.warn(
                f"max_new_tokens={options['max_new_tokens']} lowered to {room}: "
                f"{'the prompt' if len(prompts) == 1 else 'the longest prompt of the batch'} takes "
                f"{width} of the model's {window} positions",
                stacklevel=6,  # the caller of attribute() or attribute_many()
            )
            options["max_new_tokens"] = room
        pad = self.tokenizer.pad_token_id
        pad = self.tokenizer.eos_token_id if pad is None else pad
        ids = torch.full((len(prompts), width), pad, dtype=torch.long, device=self.model.device)
        mask = torch.zeros_like(ids)
        for row, prompt in enumerate(prompts):  # left padding: every prompt ends where generation starts
            ids[row, width - len(prompt) :] = torch.tensor(prompt, device=ids.device)
            mask[row, width - len(prompt) :] = 1
        generated = self.model.generate(  # type: ignore[operator]  # transformers types generate's decorator badly
            ids, attention_mask=mask, pad_token_id=pad, **options
        )
        answers = [
            str(self.tokenizer.decode(row[width:], skip_special_tokens=True)).strip() for row in generated
        ]
        if not all(answers):
            raise RuntimeError("the model generated an empty answer; pass target= to explain a given answer")
        return answers, cache


def _checked_target(target: object) -> str:
    """A given answer, refused when it is not a non-empty string of usable text."""
    if not isinstance(target, str):
        raise TypeError(f"target must be the answer string or None, got {type(target).__name__}")
    check_text("target", target)
    if not target.strip():
        raise ValueError("target is empty; give the answer to explain, or None to generate it")
    return target


def _sequence(argument: str, value: Any) -> list[Any]:
    """``value`` as a list, refused when it is not a sequence of items (a single string or input)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(
            f"{argument} must be a sequence (one item per example), got {type(value).__name__}; "
            "for a single example call attribute()"
        )
    return list(value)


def _per_input(spec: SpanSpec | Sequence[SpanSpec], n_inputs: int, argument: str) -> list[SpanSpec]:
    """One span spec per input: ``spec`` for each, or ``spec``'s own items when each is a name or a sequence
    of ``(start, end)`` pairs (a sequence of pairs itself is one spec for every input)."""
    if not _are_specs(spec):
        return [cast(SpanSpec, spec)] * n_inputs
    if len(spec) != n_inputs:
        raise ValueError(f"{argument} gives {len(spec)} specs for {n_inputs} inputs; give one per input")
    return list(spec)


def _are_specs(spec: SpanSpec | Sequence[SpanSpec]) -> TypeGuard[Sequence[SpanSpec]]:
    """Whether ``spec`` is a non-empty sequence of specs: names, or sequences of pairs (not of numbers)."""
    return (
        not isinstance(spec, str)
        and len(spec) > 0
        and all(
            isinstance(item, str)
            or (isinstance(item, Sequence) and not any(isinstance(pair, (int, np.integer)) for pair in item))
            for item in spec
        )
    )


def unit_sum(per_token: torch.Tensor, unit_ranges: Sequence[range]) -> torch.Tensor:
    """``[A, ...]`` per-answer-token values summed over each output unit: ``[U, ...]``."""
    return torch.stack([per_token[list(rows)].sum(0) for rows in unit_ranges])


def span_sum(per_position: torch.Tensor, context_ranges: Sequence[Sequence[int]]) -> torch.Tensor:
    """``[..., P]`` per-prompt-position values summed over each context span: ``[..., n_spans]``."""
    return torch.stack([per_position[..., list(r)].sum(-1) for r in context_ranges], dim=-1)


def normalise(scores: torch.Tensor) -> torch.Tensor:
    """Scores over the last dim divided by their sum (paper Eq. 7); all-zero rows stay zero."""
    total = scores.sum(-1, keepdim=True)
    return scores / torch.where(total > 0, total, torch.ones_like(total))
