"""Scoped routing of a model's attention through an rcattr wrapper of its own kernel.

:func:`route` registers ``prefix + <the model's implementation>`` in transformers' attention and mask
registries (with the mask of the implementation it wraps) and switches the model to it; :func:`unroute`
switches the model back and removes the registration once no route uses it. Routes are counted per
model and prefix, so nested or concurrent holders (two captures, several caches of one model) share one
and the last to leave restores the model and the registries exactly as they were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from transformers import PreTrainedModel

from rcattr._compat import AttentionFunction, register_attention, unregister_attention

__all__ = ["route", "unroute"]


@dataclass
class _Route:
    previous: str
    name: str
    holders: int = 1
    wraps_ours: bool = False  # ``previous`` is another rcattr route's name, which must outlive this one


_ROUTES: dict[tuple[int, str], _Route] = {}  # (id(model), prefix) -> the route and how many hold it
_USES: Counter[str] = Counter()  # registered name -> routes using it


def route(model: PreTrainedModel, prefix: str, wrap: Callable[[str], AttentionFunction]) -> str:
    """Route ``model``'s attention through ``wrap(<its implementation>)``; returns the routed name.

    Call :func:`unroute` with the same ``prefix`` once done (in a ``finally`` or ``__exit__``).
    """
    key = (id(model), prefix)
    existing = _ROUTES.get(key)
    if (
        existing is not None and existing.name in model.config._attn_implementation
    ):  # routed, maybe wrapped again
        existing.holders += 1
        return existing.name
    previous = model.config._attn_implementation
    name = prefix + previous
    if not _USES[name]:
        register_attention(name, wrap(previous), mask_like=previous)
    _USES[name] += 1
    wraps_ours = previous in _USES
    if wraps_ours:
        _USES[previous] += 1
    try:
        model.set_attn_implementation(name)
    except BaseException:
        _release_name(name)
        if wraps_ours:
            _release_name(previous)
        raise
    _ROUTES[key] = _Route(previous, name, wraps_ours=wraps_ours)
    return name


def unroute(model: PreTrainedModel, prefix: str) -> None:
    """Release one hold on ``model``'s route; the last one switches the model back and unregisters."""
    key = (id(model), prefix)
    held = _ROUTES.get(key)
    if held is None:
        return
    held.holders -= 1
    if held.holders:
        return
    del _ROUTES[key]
    try:
        if model.config._attn_implementation == held.name:
            model.set_attn_implementation(held.previous)
    finally:
        _release_name(held.name)
        if held.wraps_ours:
            _release_name(held.previous)


def _release_name(name: str) -> None:
    _USES[name] -= 1
    if _USES[name] <= 0:
        del _USES[name]
        unregister_attention(name)
