"""The KV benchmark's settings (rcattr.eval.kv.config): what is refused and what they default to."""

from __future__ import annotations

import pytest

from rcattr.eval.kv.config import DEFAULT_MAX_NEW_TOKENS, KVBenchmarkConfig


def test_unknown_datasets_and_variants_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown dataset 'trivia'"):
        KVBenchmarkConfig("trivia")
    with pytest.raises(ValueError, match="sink"):
        KVBenchmarkConfig("squad", rc_variants=("sink",))


def test_answer_tokens_default_per_dataset() -> None:
    assert KVBenchmarkConfig("qmsum").answer_tokens == DEFAULT_MAX_NEW_TOKENS["qmsum"]
    assert KVBenchmarkConfig("qmsum", max_new_tokens=5).answer_tokens == 5
