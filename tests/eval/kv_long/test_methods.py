"""The long-generation benchmark's methods (rcattr/eval/kv_long/methods.py)."""

from __future__ import annotations

import pytest

from rcattr.eval.kv_long.methods import RCDecoding


def test_question_window_without_decode_time_eviction_is_refused() -> None:
    with pytest.raises(ValueError, match="question_window=True needs decode_time=True"):
        RCDecoding(decode_time=False, question_window=True)
