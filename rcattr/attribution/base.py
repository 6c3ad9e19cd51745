"""What every attribution method shares: from an input and an answer to spans, tokens and a result.

[`SpanAttributor`][rcattr.attribution.base.SpanAttributor] renders the prompt, tokenizes it with character offsets, generates the
answer when none is given, and lays out the context spans and output units as token positions
([`Example`][rcattr.attribution.example.Example]). A method only scores: [`SpanAttributor.explain`][rcattr.attribution.base.SpanAttributor.explain] turns an example into
`[n_spans]` scores for the whole answer and `[n_outputs, n_spans]` per output unit. RC and
every baseline in [`rcattr.baselines`][rcattr.baselines] share this path, so they see the same spans and the same
tokens and return the same [`RCAttributionResult`][rcattr.attribution.result.RCAttributionResult].
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeAlias, overload

import numpy as np
import torch
from captum.attr import TextTemplateInput, TextTokenInput
from transformers import DynamicCache, PreTrainedModel

from rcattr.attribution import example as layout
from rcattr.attribution.example import Draft, Example, SpanSpec
from rcattr.attribution.many import (
    OnError,
    attempt,
    check_on_error,
    checked_target,
    is_count,
    per_input,
    sequence,
    settled,
    token_batches,
)
from rcattr.attribution.result import RCAttributionResult
from rcattr.options import OUTPUT_GRANULARITIES
from rcattr.protocols import TokenizerLike, check_model_and_tokenizer
from rcattr.runtime.generation import generation_options, greedy_answers, model_window, note_base_model
from rcattr.text.prompting import ContextInput, Prompt, render_prompt
from rcattr.text.segmentation import sentence_spans, token_ranges, token_spans

AttributionInput: TypeAlias = ContextInput | TextTemplateInput | TextTokenInput | str


class SpanAttributor(ABC):
    """Base of every attribution method: `attribute(inp, target)` -> scores per context span.

    Subclasses set `name` and implement [`explain`][rcattr.attribution.base.SpanAttributor.explain], usually as
    `example.result(seq_attr, token_attr, self.name, inp)`.
    """

    name: ClassVar[str]

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike) -> None:
        check_model_and_tokenizer(type(self).__name__, model, tokenizer)
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
        """Attribute `target` (or the model's greedy answer) to the spans of the context.

        Parameters
        ----------
        inp : str, ContextInput, captum TextTemplateInput or TextTokenInput
            The context (a string is a context without question). For captum inputs the features
            are the spans: the template's values (grouped by its mask) or the tokens.
        target : str, optional
            The answer to explain; None generates it greedily with `gen_args` first.
        granularity : {"sentence", "chunk", "token"} or sequence of (start, end), default "sentence"
            Context spans: sentences, whole chunks (documents), tokens, or character spans of a
            string context. Ignored for captum inputs, whose features are the spans.
        output_granularity : {"answer", "sentence", "token"} or sequence of (start, end), default "answer"
            One `token_attr` row per output unit: the whole answer, its sentences, its tokens, or
            character spans of the answer.
        gen_args : mapping, optional
            Extra `generate` arguments when `target` is None (default: greedy, 128 new tokens).

        Returns
        -------
        RCAttributionResult
            `seq_attr [n_spans]` for the whole answer, `token_attr [n_outputs, n_spans]`.
        """
        if target is None:
            note_base_model(self.tokenizer)
        example = self.prepare(inp, target, granularity, output_granularity, gen_args)
        return self.explain(example, inp)

    @overload
    def attribute_many(
        self,
        inputs: Sequence[AttributionInput],
        targets: Sequence[str | None] | None = None,
        *,
        batch_size: int = 8,
        max_batch_tokens: int | None = 8192,
        granularity: SpanSpec | Sequence[SpanSpec] = "sentence",
        output_granularity: SpanSpec | Sequence[SpanSpec] = "answer",
        gen_args: Mapping[str, Any] | None = None,
        progress: bool = True,
        errors: Literal["raise"] = "raise",
    ) -> list[RCAttributionResult]: ...

    @overload
    def attribute_many(
        self,
        inputs: Sequence[AttributionInput],
        targets: Sequence[str | None] | None = None,
        *,
        batch_size: int = 8,
        max_batch_tokens: int | None = 8192,
        granularity: SpanSpec | Sequence[SpanSpec] = "sentence",
        output_granularity: SpanSpec | Sequence[SpanSpec] = "answer",
        gen_args: Mapping[str, Any] | None = None,
        progress: bool = True,
        errors: OnError,
    ) -> list[RCAttributionResult | None]: ...

    @torch.no_grad()
    def attribute_many(
        self,
        inputs: Sequence[AttributionInput],
        targets: Sequence[str | None] | None = None,
        *,
        batch_size: int = 8,
        max_batch_tokens: int | None = 8192,
        granularity: SpanSpec | Sequence[SpanSpec] = "sentence",
        output_granularity: SpanSpec | Sequence[SpanSpec] = "answer",
        gen_args: Mapping[str, Any] | None = None,
        progress: bool = True,
        errors: OnError = "raise",
    ) -> list[RCAttributionResult] | list[RCAttributionResult | None]:
        """[`attribute`][rcattr.attribution.base.SpanAttributor.attribute] for many inputs, `batch_size` at a time: the same results, in order.

        Every input is rendered, tokenized and checked against the model's window first, so that a bad one
        is refused before any model work. The answers of a batch that are not given are then generated
        together (greedy, left-padded, no cache kept), and a method that can explain a batch at once does
        ([`RCAttributor`][rcattr.attribution.attributor.RCAttributor] runs one left-padded forward per batch); the others explain its
        examples one by one. A batch that fails is run again one input at a time, to find the input.

        Parameters
        ----------
        inputs : sequence of str, ContextInput, captum TextTemplateInput or TextTokenInput
            One input per example, as [`attribute`][rcattr.attribution.base.SpanAttributor.attribute] takes it.
        targets : sequence of str or None, optional
            One answer per input (None entries are generated); None generates them all.
        batch_size : int, default 8
            Examples prepared and explained together; a larger batch is faster per example on a GPU
            and needs memory for `batch_size` padded sequences.
        max_batch_tokens : int or None, default 8192
            At most this many padded prompt tokens in a batch (its inputs times its longest prompt), but always
            one input: long prompts run alone, within the memory of one [`attribute`][rcattr.attribution.base.SpanAttributor.attribute] call. None: no limit.
        granularity : span spec, or a list of them, one per input, default "sentence"
            As in [`attribute`][rcattr.attribution.base.SpanAttributor.attribute], for every input; a list whose items are each a name or a sequence
            of `(start, end)` pairs gives every input its own (e.g. the gold spans of each answer).
        output_granularity : span spec, or a list of them, one per input, default "answer"
            The same for the output units.
        gen_args : mapping, optional
            Extra `generate` arguments for the answers generated (`num_return_sequences` stays 1).
        progress : bool, default True
            Show a progress bar over the examples.
        errors : {"raise", "skip"}, default "raise"
            What an input that fails does: raise its error, its message prefixed with `inputs[i]: `, or
            get None in the results with a warning that names it and the error, while the others finish.

        Returns
        -------
        list of RCAttributionResult (or None for an input skipped)
            `results[i]` equals `attribute(inputs[i], targets[i], ...)`: `seq_attr [n_spans_i]`,
            `token_attr [n_outputs_i, n_spans_i]`.

        Examples
        --------
        >>> inputs = [ContextInput(docs, question) for docs, question in pairs]
        >>> results = attributor.attribute_many(inputs, answers, batch_size=16, granularity="chunk")
        >>> [result.top(1)[0][0].source for result in results]
        [0, 2, 1]
        """
        inputs = sequence("inputs", inputs)
        targets = [None] * len(inputs) if targets is None else sequence("targets", targets)
        if len(targets) != len(inputs):
            raise ValueError(
                f"targets has {len(targets)} entries for {len(inputs)} inputs; give one per input"
            )
        for name, value in (("batch_size", batch_size), ("max_batch_tokens", max_batch_tokens)):
            if (value is not None or name == "batch_size") and not is_count(value):
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        check_on_error(errors)
        generation_options(self.model, gen_args)  # refused here rather than for each input
        if any(target is None for target in targets):
            note_base_model(self.tokenizer)
        spans = per_input(granularity, len(inputs), "granularity")
        units = per_input(output_granularity, len(inputs), "output_granularity")
        from tqdm.auto import tqdm

        results: list[RCAttributionResult | None] = [None] * len(inputs)
        drafts: list[tuple[int, Draft]] = settled(
            [
                (index, attempt(self._accepted_draft, *item))
                for index, item in enumerate(zip(inputs, targets, spans, units, strict=True))
            ],
            errors,
        )
        with tqdm(total=len(inputs), desc=self.name, unit="example", disable=not progress) as bar:
            bar.update(len(inputs) - len(drafts))
            for batch in token_batches(drafts, batch_size, max_batch_tokens):
                done: list[tuple[int, RCAttributionResult]] = settled(
                    self._attribute_batch(batch, inputs, targets, units, gen_args), errors
                )
                for index, result in done:
                    results[index] = result
                bar.update(len(batch))
        return results

    def check_input(
        self,
        inp: AttributionInput,
        target: str | None = None,
        *,
        granularity: SpanSpec = "sentence",
        output_granularity: SpanSpec = "answer",
    ) -> int:
        """Raise what [`attribute`][rcattr.attribution.base.SpanAttributor.attribute] would raise of `inp` and `target` before any model work (an empty
        context, bad spans, a prompt and answer beyond the model's window), with the tokenizer alone; else return
        the prompt's number of tokens (a service checks a request with it before queueing it)."""
        return len(self._accepted_draft(inp, target, granularity, output_granularity).ids)

    def _accepted_draft(
        self, inp: AttributionInput, target: str | None, granularity: SpanSpec, output_granularity: SpanSpec
    ) -> Draft:
        """The draft of `inp`, its given `target` checked against the model's window."""
        draft = self._draft(inp, granularity, output_granularity)
        if target is not None:
            self._answer_encoding(draft, checked_target(target))
        return draft

    def _attribute_batch(
        self,
        batch: Sequence[tuple[int, Draft]],
        inputs: Sequence[AttributionInput],
        targets: Sequence[str | None],
        output_granularities: Sequence[SpanSpec],
        gen_args: Mapping[str, Any] | None,
    ) -> list[tuple[int, RCAttributionResult | Exception]]:
        """The results of a batch of drafts (`inputs[index]`'s each); a batch that fails runs again one by
        one, so that the error is the one input's."""
        indices = [index for index, _ in batch]
        try:
            drafts = [draft for _, draft in batch]
            answers, _ = self._answers(drafts, [targets[i] for i in indices], gen_args, keep_cache=False)
            examples = [
                self._example(draft, answer, output_granularities[index])
                for (index, draft), answer in zip(batch, answers, strict=True)
            ]
            return list(zip(indices, self.explain_batch(examples, [inputs[i] for i in indices]), strict=True))
        except Exception as error:  # named, then raised or skipped, by attribute_many
            if len(batch) == 1:
                return [(indices[0], error)]
            return [
                done
                for one in batch
                for done in self._attribute_batch([one], inputs, targets, output_granularities, gen_args)
            ]

    @abstractmethod
    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        """The result for one prepared example: higher scores mean more attributed."""

    def explain_batch(
        self, examples: Sequence[Example], inputs: Sequence[AttributionInput]
    ) -> list[RCAttributionResult]:
        """The results of a batch of prepared examples: [`explain`][rcattr.attribution.base.SpanAttributor.explain] of each, unless a method batches."""
        return list(map(self.explain, examples, inputs))

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

    def _draft(self, inp: AttributionInput, granularity: SpanSpec, output_granularity: SpanSpec) -> Draft:
        """The prompt of `inp`, tokenized, with its context spans; refused when it fills the model's window."""
        prompt = render_prompt(self.tokenizer, inp)
        prompt_ids, prompt_offsets = self._tokenize_prompt(prompt)
        context_spans, ranges = layout.context_spans(prompt, prompt_offsets, granularity)
        prompt_ids, context_ranges = layout.sink_before_context(prompt_ids, ranges, self.tokenizer)
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
        answer_ids, answer_offsets = self._answer_encoding(draft, answer)
        sentences = sentence_spans(answer)
        # a whole-answer unit is also scored per sentence, so that its citations are per sentence
        added = sentences if output_granularity == "answer" and len(sentences) > 1 else []
        output_spans = [*layout.answer_spans(answer, answer_offsets, output_granularity), *added]
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
            answer_sentences=list(token_ranges(sentences, answer_offsets, [0])),
            prompt_cache=cache,
            sentence_units=len(added),
        )

    def _answer_encoding(self, draft: Draft, answer: str) -> tuple[list[int], np.ndarray]:
        """The answer's token ids and character offsets; refused when the prompt and answer exceed the window."""
        encoded = self.tokenizer(answer, add_special_tokens=False, return_offsets_mapping=True)
        answer_ids = list(encoded["input_ids"])
        total, window = len(draft.ids) + len(answer_ids), self._window
        if window is not None and total > window:
            raise ValueError(
                f"prompt ({len(draft.ids)} tokens) + answer ({len(answer_ids)} tokens) = {total} tokens exceeds "
                f"the model's window of {window} positions"
            )
        return answer_ids, np.asarray(encoded["offset_mapping"], dtype=np.int64).reshape(-1, 2)

    @property
    def _window(self) -> int | None:
        return model_window(self.model)

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
        with `keep_cache` and one draft to generate, also the cache of its generation."""
        given = [None if target is None else checked_target(target) for target in targets]
        prompts = [draft.ids for draft, answer in zip(drafts, given, strict=True) if answer is None]
        generated, cache = (
            greedy_answers(self.model, self.tokenizer, prompts, gen_args, keep_cache)
            if prompts
            else ([], None)
        )
        fresh = iter(generated)
        return [next(fresh) if answer is None else answer for answer in given], cache
