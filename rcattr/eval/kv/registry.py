"""The methods of the KV benchmark by name, in the registry [`default_kv_methods`][rcattr.eval.kv.registry.default_kv_methods] builds.

A name on the command line (`--methods rc,snapkv`) is a family of caches: [`RCFamily`][rcattr.eval.kv.registry.RCFamily] is
RCKVCache at every `c` × window × scoring variant of the run's config, [`PressFamily`][rcattr.eval.kv.registry.PressFamily] a kvpress
press at every ratio. The runner gives each setting (a [`KVMethod`][rcattr.eval.kv.methods.KVMethod]) its own
rows; add a family of your own to a registry and give it to [`KVBenchmark`][rcattr.eval.kv.runner.KVBenchmark].
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from rcattr.eval.common.registry import MethodRegistry
from rcattr.eval.kv.config import KVBenchmarkConfig
from rcattr.eval.kv.methods import FullCache, KVMethod, PressMethod, RCMethod
from rcattr.eval.kv.presses import PRESSES


class KVFamily(ABC):
    """A method of the KV benchmark: its settings for a run.

    Attributes
    ----------
    name : str
        The method's name on the command line and in the results.
    needs_kvpress : bool
        Whether its caches need kvpress (and so the environment of `make setup-kvpress`).
    """

    name: str
    needs_kvpress: ClassVar[bool] = False

    @abstractmethod
    def settings(self, config: KVBenchmarkConfig) -> list[KVMethod]:
        """The caches the run compares for this method, one per setting of `config`."""


@dataclass(frozen=True)
class RCFamily(KVFamily):
    """RCKVCache at every scoring variant, window, and threshold `c` or share `rc_ratios` of the config."""

    name: str = "rc"

    def settings(self, config: KVBenchmarkConfig) -> list[KVMethod]:
        chunks = "prompt" if config.protocol == "once" else "every"  # the question asked after: kept, or cut
        thresholds: list[KVMethod] = [
            RCMethod(c, window, variant, chunks=chunks)
            for variant in config.rc_variants
            for window in config.window
            for c in config.c
        ]
        ratios: list[KVMethod] = [
            RCMethod(1.0, window, variant, ratio=ratio, chunks=chunks)
            for variant in config.rc_variants
            for window in config.window
            for ratio in config.rc_ratios
        ]
        return thresholds + ratios


@dataclass(frozen=True)
class PressFamily(KVFamily):
    """The kvpress press `name` (a key of [`PRESSES`][rcattr.eval.kv.presses.PRESSES]) at every ratio."""

    name: str
    needs_kvpress: ClassVar[bool] = True

    def settings(self, config: KVBenchmarkConfig) -> list[KVMethod]:
        return [PressMethod(self.name, ratio) for ratio in config.ratios]


KVMethods = MethodRegistry[KVFamily]


def default_kv_methods() -> KVMethods:
    """A new registry of the built-in methods: `rc`, then every press."""
    return MethodRegistry([RCFamily(), *(PressFamily(name) for name in PRESSES)], reserved=("full",))


KV_METHODS = tuple(default_kv_methods())  # the built-in names


def kv_methods(config: KVBenchmarkConfig, methods: KVMethods | None = None) -> list[KVMethod]:
    """The full-cache reference, then every method of `config.methods` at every setting (the methods of
    `methods`, default [`default_kv_methods`][rcattr.eval.kv.registry.default_kv_methods])."""
    registry = default_kv_methods() if methods is None else methods
    registry.check(config.methods)
    return [FullCache(), *(method for name in config.methods for method in registry[name].settings(config))]
