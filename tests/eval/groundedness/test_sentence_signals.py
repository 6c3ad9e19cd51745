"""Sentence-level signals (rcattr.eval.groundedness.sentence_signals): content coverage of the documents."""

from __future__ import annotations

import pytest

from rcattr.eval.groundedness.sentence_signals import content_coverage


def test_content_coverage_counts_content_words_found_in_the_documents() -> None:
    assert content_coverage(
        "The tower is 330 metres tall in Lyon.", ["A tower of 330 metres."]
    ) == pytest.approx(3 / 5)
    assert content_coverage("It is.", ["x"]) == 1.0
