"""The question-after-context protocol of the KV benchmark (the one kvpress's pipeline follows).

The chat-formatted prompt is cut in two: the **context** part (template opening and the context) is
prefilled, and compressed, on its own; the **question** part (question, instruction and the template's
assistant opening) follows uncompressed, at the positions after the whole context (`position_ids` from
`n_context`, which keeps RoPE positions right when a press has shortened the cache). A cache whose layers
hold different numbers of entries (PyramidKV) gets its multi-token inputs one token at a time: transformers
builds one attention mask for all layers, sized for the first, which fails on the others (kvpress's own
pipeline fails there the same way); one token at a time needs no mask and gives the same result.

* [`greedy_answer`][rcattr.eval.kv.protocol.greedy_answer]: greedy decoding from there, as kvpress's `generate_answer`.
* [`teacher_forced`][rcattr.eval.kv.protocol.teacher_forced]: the question and a given answer fed in one forward; at each position that predicts
  an answer token (the last question token and the answer's own tokens but the last), the next-token
  log-probabilities and the last layer's per-head attention outputs (for the value error rate).

Both append what they feed to the cache they are given: pass a copy to reuse a compressed cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import Cache, PreTrainedModel

from rcattr.eval.kv.metrics import LastLayerHeadOutputs
from rcattr.kvcache.context.prompt import SplitPrompt
from rcattr.runtime.compat import cache_argument


def __getattr__(name: str) -> object:
    """`split_prompt`'s old path (it moved to [`rcattr.kvcache`][rcattr.kvcache]), with a DeprecationWarning until 0.3.0."""
    if name != "split_prompt":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from rcattr.kvcache.context.prompt import split_prompt

    warnings.warn(
        "rcattr.eval.kv.protocol.split_prompt moved to rcattr.kvcache.split_prompt; the old path goes in 0.3.0",
        DeprecationWarning,
        stacklevel=2,
    )
    return split_prompt


def stop_ids(model: PreTrainedModel) -> set[int]:
    eos = model.generation_config.eos_token_id
    return set() if eos is None else {eos} if isinstance(eos, int) else set(eos)


def _positions(start: int, count: int) -> torch.Tensor:
    return torch.arange(start, start + count).unsqueeze(0)


def _uneven(cache: Cache) -> bool:
    return len({cache.get_seq_length(i) for i in range(len(cache.layers))}) > 1


def feed(
    model: PreTrainedModel, cache: Cache, input_ids: torch.Tensor, start: int, keep: int = 1
) -> torch.Tensor:
    """Feed `input_ids [1, q]` at positions `start ...`; the logits `[keep, vocab]` of the last `keep`."""
    steps = input_ids.split(1, dim=1) if _uneven(cache) and input_ids.shape[1] > 1 else (input_ids,)
    logits = []
    for step in steps:
        position_ids = _positions(start, step.shape[1])
        logits.append(
            model(
                step, **cache_argument(model, cache), position_ids=position_ids, logits_to_keep=keep
            ).logits[0]
        )
        start += step.shape[1]
    return torch.cat(logits)[-keep:]


@torch.no_grad()
def greedy_answer(
    model: PreTrainedModel, cache: Cache, prompt: SplitPrompt, max_new_tokens: int
) -> torch.Tensor:
    """`[T]` greedy answer ids (stop token included) after the context already in `cache`."""
    position = prompt.n_context
    answer = [int(feed(model, cache, prompt.question_ids, position)[-1].argmax())]
    position += prompt.question_ids.shape[1]
    stop = stop_ids(model)
    while answer[-1] not in stop and len(answer) < max_new_tokens:
        answer.append(int(feed(model, cache, torch.tensor([answer[-1:]]), position)[-1].argmax()))
        position += 1
    return torch.tensor(answer)


@dataclass(frozen=True)
class TeacherForced:
    """A cache's outputs at the positions predicting each token of a given answer `[T]`."""

    log_probs: torch.Tensor  # [T, vocab] next-token log-probabilities
    heads: torch.Tensor  # [T, H, d] the last layer's per-head attention outputs (the input of o_proj)


@torch.no_grad()
def teacher_forced(
    model: PreTrainedModel, cache: Cache, prompt: SplitPrompt, answer: torch.Tensor
) -> TeacherForced:
    """The question, then `answer [T]` but its last token, after the context in `cache`."""
    question = prompt.question_ids
    inputs = torch.cat([question, answer[None, :-1]], dim=1)
    count = answer.shape[0]
    with LastLayerHeadOutputs(model) as outputs:
        logits = feed(model, cache, inputs, prompt.n_context, keep=count)
    first = question.shape[1] - 1
    return TeacherForced(logits.float().log_softmax(-1), outputs.heads[0, first : first + count])
