"""The tiny model and tokenizer the baseline tests share."""

from __future__ import annotations

import pytest

from tests.helpers import char_tokenizer, tiny_model


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def tokenizer():
    return char_tokenizer()
