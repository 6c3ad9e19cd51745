"""Full and compressed generations compared token by token (rcattr.cli.compare)."""

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
    from rcattr.cli.compare import AnswerAgreement

    found = AnswerAgreement.of(reference, other)
    assert found.first_difference == first
    assert found.agreement == pytest.approx(agreement)
    assert found.length == max(len(reference), len(other))


def test_a_chunked_comparison_refuses_a_budget_of_the_whole_cache() -> None:
    from rcattr.cli.compare import compare_generations
    from rcattr.kvcache import RCKVCache
    from rcattr.text.prompting import ContextInput
    from tests.helpers import char_tokenizer, kv_model

    model = kv_model("llama")
    inp = ContextInput("Paris is in France.", "Where?")
    with pytest.raises(ValueError, match="TokenBudget bounds the whole cache"):
        compare_generations(
            model, char_tokenizer(), inp, RCKVCache(model, budget=16, window=4), 4, prefill_chunk=8
        )
    chunked = compare_generations(
        model, char_tokenizer(), inp, RCKVCache(model, c=0.0, window=4), 4, prefill_chunk=8
    )
    assert chunked.compressed == chunked.full  # nothing evicted: the chunks change nothing
