"""The module paths that moved in rcattr 0.2.0 (the core's folders: runtime, text, heads, record, attribution, grounding),
still importable until rcattr 0.3.0 with a `DeprecationWarning` that names the new path.

`import rcattr` adds [`MovedModules`][rcattr.moved.MovedModules] to the end of `sys.meta_path`: it is asked only for the paths
nothing else finds, and answers an old path with the new module itself (`rcattr.selectors is
rcattr.heads.selectors`), so that names, `isinstance` and pickles agree. The names of the old module
`rcattr.heads` (now a package) come from `rcattr.heads.scores` the same way ([`moved_name`][rcattr.moved.moved_name]).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

MOVED_IN = "0.2.0"
"""The release the paths moved in."""
REMOVED_IN = "0.3.0"
"""The release the old paths go in."""

MOVED_MODULES: dict[str, str] = {
    "rcattr.attributed": "rcattr.record.attributed",
    "rcattr.attributor": "rcattr.attribution.attributor",
    "rcattr.base": "rcattr.attribution.base",
    "rcattr.example": "rcattr.attribution.example",
    "rcattr.fusion": "rcattr.attribution.fusion",
    "rcattr.lexical": "rcattr.attribution.lexical",
    "rcattr.many": "rcattr.attribution.many",
    "rcattr.reduction": "rcattr.attribution.reduction",
    "rcattr.result": "rcattr.attribution.result",
    "rcattr.scorers": "rcattr.attribution.scorers",
    "rcattr.spans": "rcattr.attribution.spans",
    "rcattr.citations": "rcattr.grounding.citations",
    "rcattr.claims": "rcattr.grounding.claims",
    "rcattr.signals": "rcattr.record.signals",
    "rcattr.support": "rcattr.grounding.support",
    "rcattr.vouching": "rcattr.grounding.vouching",
    "rcattr.head_selection": "rcattr.heads.selection",
    "rcattr.selectors": "rcattr.heads.selectors",
    "rcattr.attention": "rcattr.runtime.attention",
    "rcattr.capture": "rcattr.runtime.capture",
    "rcattr.compat": "rcattr.runtime.compat",
    "rcattr.generation": "rcattr.runtime.generation",
    "rcattr.models": "rcattr.runtime.models",
    "rcattr.documents": "rcattr.text.documents",
    "rcattr.prompting": "rcattr.text.prompting",
    "rcattr.segmentation": "rcattr.text.segmentation",
    "rcattr.eval.attribution.head_selection": "rcattr.eval.attribution.selection_rules",
    "rcattr.eval.groundedness.context_signals": "rcattr.attribution.head_statistics",
    "rcattr.grounding.token_signals": "rcattr.attribution.token_signals",
    "rcattr.kvcache.compare": "rcattr.cli.compare",
    "rcattr.attribution.record": "rcattr.record.record",
    "rcattr.attribution.attributed": "rcattr.record.attributed",
    "rcattr.grounding.signals": "rcattr.record.signals",
    "rcattr.grounding.head_statistics": "rcattr.attribution.head_statistics",
    "rcattr.grounding.claim_checks": "rcattr.attribution.claim_checks",
}
"""Old module path -> where it lives now."""

MOVED_NAMES: dict[str, tuple[str, Sequence[str]]] = {
    "rcattr.heads": (
        "rcattr.heads.scores",
        (
            "OUTLIER_SIGMAS",
            "MIN_HEAD_SHARE",
            "FULL_REACH",
            "LayerRC",
            "LayerSuperiority",
            "layer_superiority",
            "layer_rc",
            "peak_superiority",
            "head_count",
            "outlier_count",
            "min_heads",
            "seeing_heads",
            "top_heads",
            "fixed_heads",
        ),
    ),
}
"""A module that became a package of the same name -> the module its names live in now, and those names."""

RENAMED_NAMES: dict[str, str] = {
    "rcattr.eval.common.datasets.AttributionRecord": "rcattr.eval.common.datasets.BenchmarkRecord",
    "rcattr.eval.citations.rules.Rule": "rcattr.eval.citations.rules.CandidateRule",
}
"""A name given up because another class had it -> its name now (one class per name in rcattr)."""


def _warn(old: str, new: str, stacklevel: int) -> None:
    """The warning, pointing at the user's line `stacklevel` frames up (warnings skips the import system's)."""
    warnings.warn(
        f"{old} moved to {new}: import it from there ({old} goes in rcattr {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


class MovedModules:
    """A finder and loader (`importlib.abc.MetaPathFinder` and `Loader`'s protocol; not their subclass, whose
    import would double `import rcattr`'s time) of the old paths of [`MOVED_MODULES`][rcattr.moved.MOVED_MODULES]: the new module, with a
    warning."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", self))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED_MODULES[spec.name]
        _warn(spec.name, new, stacklevel=2)  # this method, then the importing line
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: [`create_module`][rcattr.moved.MovedModules.create_module] gave the new module, already imported."""


def install() -> None:
    """Answer the old paths from now on (once per process)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())


def moved_name(package: str, name: str) -> Any:
    """`package.name` for a name of [`MOVED_NAMES`][rcattr.moved.MOVED_NAMES] (with a warning naming its module now); AttributeError
    for any other name, as a module's `__getattr__` must."""
    module, names = MOVED_NAMES.get(package, ("", ()))
    if name not in names:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    _warn(f"{package}.{name}", f"{module}.{name}", stacklevel=3)  # this, the package's __getattr__, the user
    return getattr(importlib.import_module(module), name)


def renamed_name(module: str, name: str) -> Any:
    """`module.name` for an old name of [`RENAMED_NAMES`][rcattr.moved.RENAMED_NAMES] (with a warning naming the
    new one); AttributeError for any other name, as a module's `__getattr__` must."""
    new = RENAMED_NAMES.get(f"{module}.{name}")
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is now {new}: use the new name ({module}.{name} goes in rcattr {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=3,  # this, the module's __getattr__, the user
    )
    new_module, _, new_name = new.rpartition(".")
    return getattr(importlib.import_module(new_module), new_name)
