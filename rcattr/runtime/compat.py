"""Everything rcattr needs to know about transformers versions and internals lives here.

rcattr supports the current transformers release and the 5.2 line (kvpress pins `<5.3`).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable

import torch
import transformers
from packaging.version import Version
from transformers import AttentionInterface, PreTrainedModel
from transformers.cache_utils import Cache
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

TRANSFORMERS_VERSION = Version(transformers.__version__)

AttentionFunction = Callable[..., tuple[torch.Tensor, torch.Tensor | None]]

__all__ = [
    "TRANSFORMERS_VERSION",
    "AttentionFunction",
    "attention_function",
    "attention_implementation",
    "cache_argument",
    "mask_function",
    "mask_query_length",
    "register_attention",
    "registered_attention",
    "set_attention_implementation",
    "supports_attention_backend",
    "unregister_attention",
]


def attention_function(name: str, module: torch.nn.Module) -> AttentionFunction:
    """The attention function that `module` would call under the implementation `name`.

    `"eager"` is not in the registry: every modeling file defines its own `eager_attention_forward`.
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


def cache_argument(model: torch.nn.Module, cache: Cache) -> dict[str, Cache]:
    """`cache` as the keyword argument of `model`'s forward and `generate`:
    `model.generate(**inputs, **cache_argument(model, cache))`. Recent releases name it `cache` and
    deprecate `past_key_values` with a FutureWarning; on the 5.2 line `past_key_values` is the only
    name (`generate` refuses `cache`, and the forward ignores it). Public as
    `rcattr.kvcache.cache_argument`."""
    parameters = inspect.signature(model.forward).parameters
    return {"cache" if "cache" in parameters else "past_key_values": cache}


def attention_implementation(model: PreTrainedModel) -> str:
    """The name of the attention implementation `model` runs now (`"sdpa"`, `"eager"`, ...)."""
    return model.config._attn_implementation  # type: ignore[no-any-return]


def set_attention_implementation(model: PreTrainedModel, name: str) -> None:
    """Switch `model` (every sub-config included) to the registered implementation `name`."""
    model.set_attn_implementation(name)


def supports_attention_backend(model: PreTrainedModel) -> bool:
    """Whether `model` routes its attention through `AttentionInterface` (so that rcattr can wrap it)."""
    return bool(getattr(model, "_supports_attention_backend", False))


def mask_function(name: str) -> Callable[..., torch.Tensor | None]:
    """The mask builder that transformers uses for the attention implementation `name`."""
    return ALL_MASK_ATTENTION_FUNCTIONS[name]  # type: ignore[no-any-return]


def register_attention(name: str, function: AttentionFunction, mask_like: str) -> None:
    """Register `function` as attention implementation `name`, with the mask of `mask_like`.

    A name known to `AttentionInterface` but not to `AttentionMaskInterface` silently gets no
    causal mask at all (docs/design.md §6), so both registries are always written together.
    """
    AttentionInterface.register(name, function)
    AttentionMaskInterface.register(name, mask_function(mask_like))


def mask_query_length(query: int | torch.Tensor) -> int:
    """The query length a cache layer's `get_mask_sizes` receives: an int since transformers 5.5,
    the `cache_position` tensor before."""
    return query if isinstance(query, int) else int(query.shape[0])


def unregister_attention(name: str) -> None:
    """Remove `name` from both registries [`register_attention`][rcattr.runtime.compat.register_attention] wrote."""
    AttentionInterface._global_mapping.pop(name, None)
    AttentionMaskInterface._global_mapping.pop(name, None)


def registered_attention() -> tuple[frozenset[str], frozenset[str]]:
    """The names in transformers' attention and mask registries (to check that nothing is left behind)."""
    return frozenset(AttentionInterface._global_mapping), frozenset(AttentionMaskInterface._global_mapping)
