"""How far one setting travels through the code: the modules the calls that use it cross (issue 76, item 6).

Follows ``heads`` from ``RCAttributor.__init__`` (the head selector, then the selection it makes) through one
``attribute()``, and ``budget`` from ``RCKVCache.__init__`` (the token budget rule) through one ``generate()``.
Every Python call is profiled (``sys.setprofile``); a call *uses* the setting when the setting, or what it made,
is among the called function's arguments (``self`` included), or when a call that uses it made it. For each such call the stack of rcattr modules
from the entry point down to it is one path (a module that calls itself counts once). The script prints the
longest path, the modules every path visits, and any path that comes back to a module it left (A → B → A):

    python benchmarks/call_paths.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

import torch

from rcattr import ContextInput, RCAttributor, load_model
from rcattr.heads.selection import HeadSelection
from rcattr.kvcache import RCKVCache, cache_argument
from rcattr.kvcache.policy import TokenBudget

DOCUMENTS = [
    "The Eiffel Tower was completed in 1889. It is 330 metres tall.",
    "Mount Fuji is the highest mountain in Japan, rising 3,776 metres.",
]


def rcattr_modules(frame: FrameType | None) -> list[str]:
    """The rcattr modules of the stack from its outermost frame to ``frame``, a module repeated in a row once."""
    names = []
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("rcattr") and (not names or names[-1] != module):
            names.append(module)
        frame = frame.f_back
    return names[::-1]


def paths_using(run: Callable[[], Any], uses: Callable[[Iterable[Any]], bool]) -> list[tuple[str, ...]]:
    """The module paths of the calls during ``run()`` that use the setting: those whose arguments ``uses``
    recognises, and the calls those make in turn (what they hand on: a budget's number, a selection's heads)."""
    found: set[tuple[str, ...]] = set()
    using: set[FrameType] = set()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "return":
            using.discard(frame)
            return
        if event != "call" or not frame.f_globals.get("__name__", "").startswith("rcattr"):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if frame.f_back in using or uses(frame.f_locals.get(name) for name in names):
            using.add(frame)
            found.add(tuple(rcattr_modules(frame)))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return sorted(found, key=len)


def comes_back(path: tuple[str, ...]) -> bool:
    """Whether ``path`` returns to a module it left (A → B → A)."""
    return len(set(path)) < len(path)


def report(name: str, paths: list[tuple[str, ...]]) -> None:
    modules = sorted({module for path in paths for module in path})
    longest = max(paths, key=len)
    back = [path for path in paths if comes_back(path)]
    print(f"## {name}: {len(paths)} call paths use it, {len(modules)} modules in all")
    print(f"longest: {len(longest)} modules: " + " -> ".join(longest))
    print(f"paths that come back to a module they left: {len(back)}")
    for path in back[:5]:
        print("   " + " -> ".join(path))
    print("modules: " + ", ".join(modules) + "\n")


def main() -> None:
    model, tokenizer = load_model()
    inputs = ContextInput(DOCUMENTS, "How tall is the Eiffel Tower?")
    attributor = RCAttributor(model, tokenizer)
    selector = attributor.heads

    def uses_heads(arguments: Iterable[Any]) -> bool:
        return any(argument is selector or isinstance(argument, HeadSelection) for argument in arguments)

    heads = paths_using(
        lambda: RCAttributor(model, tokenizer, heads=selector).attribute(inputs, "It is 330 metres tall."),
        uses_heads,
    )
    report("heads (RCAttributor)", heads)

    ids = tokenizer(" ".join(DOCUMENTS) * 4 + " How tall is the Eiffel Tower?", return_tensors="pt")

    def uses_budget(arguments: Iterable[Any]) -> bool:
        # the rule itself, or what holds it (the policy)
        return any(isinstance(getattr(argument, "rule", argument), TokenBudget) for argument in arguments)

    def generate() -> None:
        with torch.no_grad(), RCKVCache(model, budget=64, decode_every=8) as cache:
            model.generate(**ids, **cache_argument(model, cache), max_new_tokens=12, do_sample=False)

    report("budget (RCKVCache)", paths_using(generate, uses_budget))


if __name__ == "__main__":
    main()
