"""Structural types shared across rcattr."""

from __future__ import annotations

from typing import Any, Protocol


class TokenizerLike(Protocol):
    """What rcattr needs from a tokenizer: a fast (offset-mapping) Hugging Face tokenizer."""

    chat_template: Any
    bos_token_id: Any
    eos_token_id: Any
    pad_token_id: Any

    def __call__(self, text: str, **kwargs: Any) -> Any: ...

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def decode(self, token_ids: Any, **kwargs: Any) -> Any: ...

    def convert_ids_to_tokens(self, ids: Any) -> Any: ...
