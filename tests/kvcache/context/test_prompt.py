"""A prompt cut where its context ends (rcattr.kvcache.context.prompt): the chat template's user turn cut after the
context, the part before the cut the same whatever the question, a system turn in front."""

from __future__ import annotations

import pytest
import torch

from rcattr.kvcache import split_prompt
from tests.helpers import KV_CONTEXT, KV_QUESTION, char_tokenizer

pytestmark = pytest.mark.transformers_line


def _whole(prompt) -> str:
    return char_tokenizer().decode(torch.cat([prompt.context_ids, prompt.question_ids], 1)[0])


def test_split_prompt_cuts_the_chat_template_between_context_and_question() -> None:
    tokenizer = char_tokenizer()
    prompt = split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION)
    whole = tokenizer.apply_chat_template(
        [{"role": "user", "content": f"{KV_CONTEXT}\n\n{KV_QUESTION}"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert _whole(prompt) == whole
    assert tokenizer.decode(prompt.context_ids[0]).endswith(KV_CONTEXT)
    assert prompt.n_context == prompt.context_ids.shape[1]
    assert torch.equal(
        prompt.context_ids, split_prompt(tokenizer, KV_CONTEXT, "Another question?").context_ids
    )
    with pytest.raises(ValueError, match="empty"):
        split_prompt(tokenizer, "  ", KV_QUESTION)


def test_a_system_turn_goes_before_the_context() -> None:
    tokenizer = char_tokenizer()
    prompt = split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION, system="Answer briefly.")
    whole = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": f"{KV_CONTEXT}\n\n{KV_QUESTION}"},
        ],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert _whole(prompt) == whole
    assert (
        prompt.question_ids.tolist() == split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION).question_ids.tolist()
    )


def test_without_a_chat_template_the_context_follows_the_bos_token() -> None:
    tokenizer = char_tokenizer(chat=False)
    prompt = split_prompt(tokenizer, KV_CONTEXT, KV_QUESTION, system="Be brief.")
    assert _whole(prompt) == f"<bos>Be brief.\n\n{KV_CONTEXT}\n\n{KV_QUESTION}\n"
