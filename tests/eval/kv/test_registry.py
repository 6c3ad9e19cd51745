"""The KV benchmark's method registry (rcattr.eval.kv.registry): a registered family runs through the protocol."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rcattr.eval.kv import KVBenchmark, KVBenchmarkConfig, default_kv_methods
from rcattr.eval.kv.methods import (
    KVMethod,
    RCMethod,
)
from rcattr.eval.kv.registry import KVFamily, kv_methods
from rcattr.eval.kv.tables import markdown_table
from rcattr.runtime.models import load_model


@dataclass(frozen=True)
class NarrowWindow(KVFamily):
    """RCKVCache with the paper's recipe and a window of 4 tokens, at every c of the config."""

    name: str = "rc_w4"

    def settings(self, config: KVBenchmarkConfig) -> list[KVMethod]:
        return [RCMethod(c, 4) for c in config.c]


def test_a_registered_method_runs_through_the_same_protocol(saved_model, data) -> None:
    methods = default_kv_methods()
    methods.add(NarrowWindow())
    with pytest.raises(ValueError, match="built-in or reserved"):
        methods.add(NarrowWindow("full"))
    assert "rc_w4" not in default_kv_methods()  # each registry is its own: no module state changed
    model, tokenizer = load_model(str(saved_model))
    config = KVBenchmarkConfig("squad", methods=("rc_w4",), c=(0.5, 1.0), max_new_tokens=4)
    results = KVBenchmark(config, model, tokenizer, data / "own", methods=methods).run()
    assert list(results["methods"]) == ["full", "rc/c=0.5/w=4", "rc/c=1/w=4"]
    assert results["methods"]["rc/c=1/w=4"]["n_records"] == 2 and "| rc | c = 1, w = 4 |" in markdown_table(
        results
    )
    with pytest.raises(ValueError, match="unknown method"):  # the default registry has no rc_w4
        KVBenchmark(config, model, tokenizer, data / "x")
    assert not (data / "x").exists()


def test_the_full_cache_comes_first_then_every_setting() -> None:
    config = KVBenchmarkConfig("squad", methods=("rc",), c=(0.5, 1.0), window=(8, 16))
    methods = kv_methods(config)
    assert len(methods) == 1 + 2 * 2  # the reference, then every (c, window)
    assert type(methods[0]).__name__ == "FullCache"
    with pytest.raises(ValueError, match="unknown method"):
        kv_methods(KVBenchmarkConfig("squad", methods=("h2o",)))
