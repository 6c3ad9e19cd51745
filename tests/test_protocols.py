"""The structural types rcattr shares (rcattr.protocols): what a tokenizer must offer."""

from __future__ import annotations

import typing

from rcattr.protocols import TokenizerLike
from tests.helpers import char_tokenizer


def test_the_test_tokenizer_offers_everything_tokenizer_like_names() -> None:
    tokenizer = char_tokenizer()
    names = set(typing.get_type_hints(TokenizerLike)) | {
        name for name in vars(TokenizerLike) if not name.startswith("_") or name == "__call__"
    }
    assert {"chat_template", "eos_token_id", "apply_chat_template", "decode", "__call__"} <= names
    assert all(hasattr(tokenizer, name) for name in names)
