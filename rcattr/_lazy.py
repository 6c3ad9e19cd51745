"""Packages whose public names are imported on first use, so that importing the package (or running its
``__main__``) does not pay for torch and transformers before it needs them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, importing each name of ``exports`` (name -> the
    module that defines it) on first use.

    Examples
    --------
    >>> __getattr__, __dir__ = lazy_exports(__name__, {"main": "rcattr.eval.kv.cli"})  # doctest: +SKIP
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[package]), *exports])

    return __getattr__, __dir__
