"""The long-generation benchmark tests' model and prompt."""

from __future__ import annotations

import pytest

from rcattr.kvcache.context.prompt import split_prompt
from tests.helpers import PARAGRAPHS, char_tokenizer, wide_llama


@pytest.fixture(scope="module")
def model_and_prompt():
    """The wide tiny Llama and a prompt of both paragraphs twice, split before the question."""
    model, tokenizer = wide_llama(), char_tokenizer()
    prompt = split_prompt(tokenizer, " ".join(PARAGRAPHS) * 2, "Where is Paris?")
    return model, prompt
