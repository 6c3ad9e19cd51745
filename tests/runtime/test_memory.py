"""Freed memory handed back (rcattr.runtime.memory): glibc's malloc_trim where there is one, nothing elsewhere,
and an RCKVCache's prefill hands back after each layer's scoring and each re-packing."""

from __future__ import annotations

import sys

import pytest
import torch

import rcattr.kvcache.cache
import rcattr.kvcache.layer
from rcattr.kvcache import EvictionPolicy, Ratio, RCKVCache, cache_argument
from rcattr.runtime import memory
from tests.helpers import kv_model

pytestmark = pytest.mark.transformers_line


def test_it_calls_malloc_trim_where_the_c_library_has_one(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: calls.append)
    memory.release_freed_memory()
    assert calls == [0]
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)
    memory.release_freed_memory()  # macOS, musl: nothing to do
    assert calls == [0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_on_linux_glibc_has_malloc_trim() -> None:
    memory._malloc_trim.cache_clear()
    assert memory._malloc_trim() is not None
    memory.release_freed_memory()


@pytest.mark.parametrize("scope", ["model", "layer"])
def test_a_prefill_releases_after_each_layer_scores_and_is_repacked(monkeypatch, scope) -> None:
    calls = []
    monkeypatch.setattr(rcattr.kvcache.layer, "release_freed_memory", lambda: calls.append("scored"))
    monkeypatch.setattr(rcattr.kvcache.cache, "release_freed_memory", lambda: calls.append("cut"))
    model = kv_model("llama")  # three evicting layers
    cache = RCKVCache(model, window=4, policy=EvictionPolicy(Ratio(0.5, scope=scope)))
    with torch.no_grad():
        model(torch.randint(3, 120, (1, 40)), **cache_argument(model, cache))
    # each layer scored (and, at layer scope, cut at once); at model scope every layer cut after the last scored
    expected = ["scored"] * 3 + ["cut"] * 3 if scope == "model" else ["scored", "cut"] * 3
    assert calls == expected
    calls.clear()
    with torch.no_grad():
        model(torch.randint(3, 120, (1, 1)), **cache_argument(model, cache))
    assert not calls  # decoding a token scores nothing
