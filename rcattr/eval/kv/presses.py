"""The kvpress presses the KV benchmark compares, by name, importable without torch or kvpress (the command
line lists them before anything heavy loads)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# name -> how to build the kvpress press at a compression ratio (the press classes' default settings): every
# press of kvpress 0.5.5 that prunes the context at prefill offline, and Expected Attention, kvpress's strongest,
# inside the head-wise wrappers (docs/benchmarks/kv-cache.md lists the presses left out and why)
PRESSES: dict[str, Callable[[Any, float], Any]] = {
    "snapkv": lambda kvpress, ratio: kvpress.SnapKVPress(compression_ratio=ratio),
    "tova": lambda kvpress, ratio: kvpress.TOVAPress(compression_ratio=ratio),
    "streaming_llm": lambda kvpress, ratio: kvpress.StreamingLLMPress(compression_ratio=ratio),
    "knorm": lambda kvpress, ratio: kvpress.KnormPress(compression_ratio=ratio),
    "pyramidkv": lambda kvpress, ratio: kvpress.PyramidKVPress(compression_ratio=ratio),
    "adakv_snapkv": lambda kvpress, ratio: kvpress.AdaKVPress(kvpress.SnapKVPress(compression_ratio=ratio)),
    "expected_attention": lambda kvpress, ratio: kvpress.ExpectedAttentionPress(compression_ratio=ratio),
    "adakv_expected_attention": lambda kvpress, ratio: kvpress.AdaKVPress(
        kvpress.ExpectedAttentionPress(compression_ratio=ratio)
    ),
    # CriticalKV weighs scores by the projected value norm itself: kvpress asks for use_vnorm=False inside it
    "criticalkv_expected_attention": lambda kvpress, ratio: kvpress.CriticalKVPress(
        kvpress.ExpectedAttentionPress(compression_ratio=ratio, use_vnorm=False)
    ),
    "critical_adakv_expected_attention": lambda kvpress, ratio: kvpress.CriticalAdaKVPress(
        press=kvpress.ExpectedAttentionPress(compression_ratio=ratio, use_vnorm=False)
    ),
    "observed_attention": lambda kvpress, ratio: kvpress.ObservedAttentionPress(compression_ratio=ratio),
    "keydiff": lambda kvpress, ratio: kvpress.KeyDiffPress(compression_ratio=ratio),
    "lagkv": lambda kvpress, ratio: kvpress.LagKVPress(compression_ratio=ratio),
    "leverage_score": lambda kvpress, ratio: kvpress.LeverageScorePress(compression_ratio=ratio),
    "non_causal_attn": lambda kvpress, ratio: kvpress.NonCausalAttnPress(compression_ratio=ratio),
    "compactor": lambda kvpress, ratio: kvpress.CompactorPress(compression_ratio=ratio),
    "cur": lambda kvpress, ratio: kvpress.CURPress(compression_ratio=ratio),
    "cap": lambda kvpress, ratio: kvpress.CapPress(compression_ratio=ratio),
    "kvcompose": lambda kvpress, ratio: kvpress.KVComposePress(compression_ratio=ratio),
    "random": lambda kvpress, ratio: kvpress.RandomPress(compression_ratio=ratio),
    # query-agnostic: they replay the context ("Repeat the previous context") and mask what it attends least
    "kvzip": lambda kvpress, ratio: kvpress.KVzipPress(compression_ratio=ratio),
    "kvgrad": lambda kvpress, ratio: kvpress.KVgradPress(compression_ratio=ratio),
}
EAGER_PRESSES = frozenset({"observed_attention"})  # they score the attention weights only eager returns
TOKENIZER_PRESSES = frozenset({"kvzip", "kvgrad"})  # they load the tokenizer from config.name_or_path
