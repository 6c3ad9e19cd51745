"""What a run of the long-generation benchmark measures ([`LongBenchmarkConfig`][rcattr.eval.kv_long.config.LongBenchmarkConfig], saved as its
`config.json`): the methods by name, the token budget, the task. Importable without torch: the command line
parses before anything heavy loads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rcattr.eval.common.registry import check_methods
from rcattr.eval.kv_long.data import LONG_TASKS

# name -> the kvpress scorer press (at a compression ratio) that PrefillDecodingPress runs at prefill and,
# inside DecodingPress, during decoding; every scorer of kvpress 0.5.5 that scores decoding steps offline
# from the keys, values or the buffered hidden states (SnapKV's window, half the interval, fits the decoding buffer)
DECODING_SCORERS: dict[str, Callable[[Any, float, int], Any]] = {
    "streaming_llm": lambda kvpress, ratio, every: kvpress.StreamingLLMPress(compression_ratio=ratio),
    "knorm": lambda kvpress, ratio, every: kvpress.KnormPress(compression_ratio=ratio),
    "tova": lambda kvpress, ratio, every: kvpress.TOVAPress(compression_ratio=ratio),
    "snapkv": lambda kvpress, ratio, every: kvpress.SnapKVPress(
        compression_ratio=ratio, window_size=min(64, every // 2)
    ),
    "expected_attention": lambda kvpress, ratio, every: kvpress.ExpectedAttentionPress(
        compression_ratio=ratio
    ),
}


@dataclass(frozen=True)
class DecodeBudget:
    """Every compressing method keeps `tokens` entries per key head after each eviction, and evicts every
    `every` generated tokens (so it holds at most `tokens + every`, plus the question's, per head)."""

    tokens: int = 256
    every: int = 32

    def __post_init__(self) -> None:
        if self.tokens < 1 or self.every < 1:
            raise ValueError(f"a token budget and an interval are >= 1, got {self.tokens} and {self.every}")


# every method (`rcattr.eval.kv_long.methods.long_methods`), in the order of the results: the full cache,
# RCKVCache with decode-time eviction (and with the question's window), without it, then kvpress's decoding
# press of every scorer
METHODS = (
    "full",
    "rc",
    "rc_question",
    "rc_prefill_only",
    *(f"kvpress_{scorer}" for scorer in DECODING_SCORERS),
)
RESUMABLE_CHANGES = ("methods", "limit")


@dataclass(frozen=True)
class LongBenchmarkConfig:
    """What a run measures; a resumed run must have the same (but for [`RESUMABLE_CHANGES`][rcattr.eval.kv_long.config.RESUMABLE_CHANGES])."""

    task: str
    methods: tuple[str, ...] = METHODS
    budget: DecodeBudget = field(default_factory=DecodeBudget)
    limit: int | None = None
    context_tokens: int = 1024  # QMSum: the meeting's opening turns that fit
    prefix_tokens: int = 256  # needle: the answer prefix
    max_new_tokens: int | None = None  # default: 512 for QMSum, 32 after the needle's prefix
    model: str | None = None

    def __post_init__(self) -> None:
        if self.task not in LONG_TASKS:
            raise ValueError(f"unknown task {self.task!r}; choose from {', '.join(LONG_TASKS)}")
        check_methods(self.methods, METHODS)

    @property
    def answer_tokens(self) -> int:
        return self.max_new_tokens or (512 if self.task == "qmsum" else 32)
