"""Structural types shared across rcattr, and the check that a model and a tokenizer are what they should be."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
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


class ClaimProbe(Protocol):
    """What a citation's verdict asks of a support probe ([`SupportProbe`][rcattr.grounding.probe.SupportProbe]):
    each claim's probability of being attributable, and the cut at an operating point."""

    def probability(self, claims: Sequence[Any]) -> Any: ...

    def cut(self, operating_point: str = ...) -> float: ...


_TOKENIZER_MEMBERS = (
    "chat_template",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "apply_chat_template",
    "decode",
    "convert_ids_to_tokens",
)


def is_tokenizer(value: object) -> bool:
    """Whether `value` is callable and has [`TokenizerLike`][rcattr.protocols.TokenizerLike]'s members. Read with `hasattr`: from Python
    3.12, `isinstance` on a runtime protocol reads attributes statically, and misses the special token ids that
    transformers' tokenizers answer through `__getattr__`."""
    return callable(value) and all(hasattr(value, name) for name in _TOKENIZER_MEMBERS)


def check_model(model: object) -> None:
    """Raise `TypeError` naming the type of `model` unless it is a transformers model (a torch module with a
    `config`)."""
    if not _is_model(model):
        raise TypeError(
            f"model must be a transformers model (a torch.nn.Module with a config), got {type(model).__name__}"
        )


def check_model_and_tokenizer(caller: str, model: object, tokenizer: object) -> None:
    """Raise `TypeError` unless `model` is a transformers model and `tokenizer` a tokenizer
    ([`TokenizerLike`][rcattr.protocols.TokenizerLike]): saying so when the two look swapped (`caller(tokenizer, model)`), else naming the
    argument and the type it got."""
    if is_tokenizer(model) and _is_model(tokenizer):
        raise TypeError(f"model and tokenizer look swapped: call {caller}(model, tokenizer)")
    check_model(model)
    if not is_tokenizer(tokenizer):
        raise TypeError(
            f"tokenizer must be a Hugging Face tokenizer (callable, with decode and apply_chat_template), got "
            f"{type(tokenizer).__name__}"
        )


def _is_model(value: object) -> bool:
    import torch  # here, not at the top: the benchmarks' torch-free command lines read TokenizerLike

    return isinstance(value, torch.nn.Module) and hasattr(value, "config")
