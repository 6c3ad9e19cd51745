"""The structural types rcattr shares (rcattr.protocols): what a tokenizer must offer, and the check that a model
and a tokenizer are each what they should be (issue 59: swapped, they are named as such)."""

from __future__ import annotations

import typing

import pytest
import torch

from rcattr.protocols import TokenizerLike, check_model, check_model_and_tokenizer, is_tokenizer
from tests.helpers import char_tokenizer


def test_the_test_tokenizer_offers_everything_tokenizer_like_names() -> None:
    tokenizer = char_tokenizer()
    names = set(typing.get_type_hints(TokenizerLike)) | {
        name for name in vars(TokenizerLike) if not name.startswith("_") or name == "__call__"
    }
    assert {"chat_template", "eos_token_id", "apply_chat_template", "decode", "__call__"} <= names
    assert all(hasattr(tokenizer, name) for name in names)


def test_a_swapped_model_and_tokenizer_are_named_as_such(llama) -> None:
    tokenizer = char_tokenizer()
    check_model_and_tokenizer("Attributor", llama, tokenizer)
    with pytest.raises(
        TypeError, match=r"^model and tokenizer look swapped: call Attributor\(model, tokenizer\)$"
    ):
        check_model_and_tokenizer("Attributor", tokenizer, llama)


@pytest.mark.parametrize(
    ("model", "tokenizer", "message"),
    [
        (
            "gpt2",
            "tokenizer",
            r"^model must be a transformers model \(a torch.nn.Module with a config\), got str$",
        ),
        (torch.nn.Linear(2, 2), "tokenizer", "model must be a transformers model .*, got Linear$"),
        (None, "tokenizer", "got NoneType$"),
        ("llama", "gpt2", r"^tokenizer must be a Hugging Face tokenizer .*, got str$"),
        ("llama", "llama", "tokenizer must be a Hugging Face tokenizer .*, got LlamaForCausalLM$"),
    ],
)
def test_what_is_no_model_or_no_tokenizer_is_named_with_its_type(
    llama, model, tokenizer, message: str
) -> None:
    model = llama if model == "llama" else model
    tokenizer = llama if tokenizer == "llama" else tokenizer
    with pytest.raises(TypeError, match=message):
        check_model_and_tokenizer("Attributor", model, tokenizer)
    if model is not llama:
        with pytest.raises(TypeError, match=message):
            check_model(model)


class _DynamicTokenizer:
    """A tokenizer whose special token ids come through ``__getattr__``, as transformers 5's do."""

    chat_template = None

    def __call__(self, text: str, **kwargs: object) -> dict:
        return {"input_ids": [ord(c) for c in text]}

    def apply_chat_template(self, conversation: object, **kwargs: object) -> str:
        return ""

    def decode(self, token_ids: object, **kwargs: object) -> str:
        return ""

    def convert_ids_to_tokens(self, ids: object) -> list:
        return []

    def __getattr__(self, name: str) -> int:
        if name in ("bos_token_id", "eos_token_id", "pad_token_id"):
            return 0
        raise AttributeError(name)


def test_special_tokens_given_through_getattr_are_found(llama) -> None:
    # Python 3.12's isinstance on a runtime protocol reads attributes statically and would miss them
    assert is_tokenizer(_DynamicTokenizer()) and not is_tokenizer(llama)
    check_model_and_tokenizer("Attributor", llama, _DynamicTokenizer())
