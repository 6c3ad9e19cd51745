"""The operator's limits are checked when the service is built."""

from __future__ import annotations

import pytest

from rcattr.serve.config import ServeConfig


def test_defaults_are_valid() -> None:
    assert ServeConfig().max_batch_size >= 1


@pytest.mark.parametrize(
    "change",
    [
        {"queue_size": 0},
        {"max_batch_size": 1.5},
        {"max_documents": True},
        {"max_batch_tokens": 0},
        {"max_wait_ms": -1},
    ],
)
def test_bad_limits_are_refused_by_name(change: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(change))):
        ServeConfig(**change)


def test_no_token_limit_is_allowed() -> None:
    assert ServeConfig(max_batch_tokens=None).max_batch_tokens is None
