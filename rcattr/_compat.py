"""Everything rcattr needs to know about transformers versions and internals lives here.

rcattr supports the current transformers release and the 5.2 line (kvpress pins ``<5.3``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
import transformers
from packaging.version import Version
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

TRANSFORMERS_VERSION = Version(transformers.__version__)

AttentionFunction = Callable[..., tuple[torch.Tensor, torch.Tensor | None]]

__all__ = [
    "TRANSFORMERS_VERSION",
    "AttentionFunction",
    "attention_function",
    "mask_function",
    "register_attention",
]


def attention_function(name: str, module: torch.nn.Module) -> AttentionFunction:
    """The attention function that ``module`` would call under the implementation ``name``.

    ``"eager"`` is not in the registry: every modeling file defines its own ``eager_attention_forward``.
    """
    if name == "eager":
        modeling = sys.modules[type(module).__module__]
        eager = getattr(modeling, "eager_attention_forward", None)
        if eager is None:
            raise NotImplementedError(
                f"{type(module).__name__} has no eager_attention_forward in {modeling.__name__}; "
                "load the model with attn_implementation='sdpa'."
            )
        return eager  # type: ignore[no-any-return]
    return ALL_ATTENTION_FUNCTIONS[name]  # type: ignore[no-any-return]


def mask_function(name: str) -> Callable[..., torch.Tensor | None]:
    """The mask builder that transformers uses for the attention implementation ``name``."""
    return ALL_MASK_ATTENTION_FUNCTIONS[name]  # type: ignore[no-any-return]


def register_attention(name: str, function: AttentionFunction, mask_like: str) -> None:
    """Register ``function`` as attention implementation ``name``, with the mask of ``mask_like``.

    A name known to ``AttentionInterface`` but not to ``AttentionMaskInterface`` silently gets no
    causal mask at all (DESIGN §6), so both registries are always written together.
    """
    AttentionInterface.register(name, function)
    AttentionMaskInterface.register(name, mask_function(mask_like))
