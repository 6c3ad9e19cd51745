"""Full and compressed generations compared token by token (rcattr.kvcache.compare)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.transformers_line


@pytest.mark.parametrize(
    ("reference", "other", "first", "agreement"),
    [
        ([1, 2, 3], [1, 2, 3], None, 1.0),
        ([1, 2, 3, 4], [1, 2, 9, 4], 2, 0.75),
        ([1, 2, 3, 4], [1, 2], 2, 0.5),
        ([5, 6], [7, 6, 8, 9], 0, 0.25),
    ],
)
def test_answer_agreement(reference, other, first, agreement):
    from rcattr.kvcache.compare import AnswerAgreement

    found = AnswerAgreement.of(reference, other)
    assert found.first_difference == first
    assert found.agreement == pytest.approx(agreement)
    assert found.length == max(len(reference), len(other))
