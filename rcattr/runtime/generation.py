"""The model's own answers, when none is given: greedy `generate` over left-padded prompts."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel

from rcattr.protocols import TokenizerLike
from rcattr.runtime.compat import cache_argument

DEFAULT_GEN_ARGS: dict[str, Any] = {"max_new_tokens": 128, "do_sample": False}

BASE_MODEL_NOTE = (
    "the tokenizer has no chat template, so the model is likely a base (not instruction-tuned) model and its own "
    "answer may be meaningless (e.g. a string of zeros); pass target= to explain a given answer, or use an "
    "instruction model such as the default, SmolLM2-135M-Instruct"
)


def note_base_model(tokenizer: TokenizerLike) -> None:
    """Warn, at the caller of `attribute()` or `attribute_many()`, that the model asked for its own answer
    has a tokenizer without a chat template ([`BASE_MODEL_NOTE`][rcattr.runtime.generation.BASE_MODEL_NOTE]): a note, not a refusal, since a base
    model's answers can still be explained."""
    if not tokenizer.chat_template:
        # 4: this function, attribute() or attribute_many(), torch.no_grad's wrapper, then their caller
        warnings.warn(BASE_MODEL_NOTE, stacklevel=4)


def model_window(model: PreTrainedModel) -> int | None:
    """The model's window (`max_position_embeddings`), if it states one."""
    return getattr(model.config.get_text_config(), "max_position_embeddings", None)


def generation_options(model: PreTrainedModel, gen_args: Mapping[str, Any] | None) -> dict[str, Any]:
    """[`DEFAULT_GEN_ARGS`][rcattr.runtime.generation.DEFAULT_GEN_ARGS] updated by `gen_args`; refused when they ask for more than one answer."""
    options = {**DEFAULT_GEN_ARGS, **(gen_args or {})}
    sequences = options.get("num_return_sequences", model.generation_config.num_return_sequences)
    if sequences not in (None, 1):
        raise ValueError(
            f"gen_args: num_return_sequences={sequences!r}, but rcattr explains one answer; leave it at 1 "
            "(with num_beams > 1 the best beam is the answer)"
        )
    return options


def greedy_answers(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    prompts: Sequence[list[int]],
    gen_args: Mapping[str, Any] | None,
    keep_cache: bool,
) -> tuple[list[str], DynamicCache | None]:
    """The greedy answers to `prompts` (token ids) from one `generate` over them, left-padded; with
    `keep_cache`, one prompt and one beam, also the generation's cache."""
    options = generation_options(model, gen_args)
    cache = None
    if keep_cache and len(prompts) == 1 and options.get("num_beams", 1) == 1:
        if not {"past_key_values", "cache"} & set(options):
            cache = DynamicCache()
            options.update(cache_argument(model, cache))
    width, window = max(map(len, prompts)), model_window(model)
    room = None if window is None else window - width
    if room is not None and options.get("max_new_tokens", 0) > room:
        warnings.warn(
            f"max_new_tokens={options['max_new_tokens']} lowered to {room}: "
            f"{'the prompt' if len(prompts) == 1 else 'the longest prompt of the batch'} takes "
            f"{width} of the model's {window} positions",
            stacklevel=6,  # the caller of attribute() or attribute_many()
        )
        options["max_new_tokens"] = room
    pad = tokenizer.pad_token_id
    pad = tokenizer.eos_token_id if pad is None else pad
    ids = torch.full((len(prompts), width), pad, dtype=torch.long, device=model.device)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):  # left padding: every prompt ends where generation starts
        ids[row, width - len(prompt) :] = torch.tensor(prompt, device=ids.device)
        mask[row, width - len(prompt) :] = 1
    generated = model.generate(  # type: ignore[operator]  # transformers types generate's decorator badly
        ids, attention_mask=mask, pad_token_id=pad, **options
    )
    answers = [str(tokenizer.decode(row[width:], skip_special_tokens=True)).strip() for row in generated]
    if not all(answers):
        raise RuntimeError("the model generated an empty answer; pass target= to explain a given answer")
    return answers, cache
