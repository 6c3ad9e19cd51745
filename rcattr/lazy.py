"""Packages whose public names are imported on first use, so that importing the package (or running its
`__main__`) does not pay for torch and transformers before it needs them."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, modules: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` for `package`, whose public names are those of
    `modules` (a module, relative to `package` when it starts with a dot -> the names it defines), each
    imported on first use.

    Examples
    --------
    >>> __getattr__, __dir__, __all__ = lazy_exports(__name__, {".cli": ["main"]})  # doctest: +SKIP
    """
    exports = {
        name: importlib.util.resolve_name(module, package)
        for module, names in modules.items()
        for name in names
    }

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[package]), *exports])

    return __getattr__, __dir__, sorted(exports)
