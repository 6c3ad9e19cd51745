"""Many inputs at once (rcattr.attribution.many): token batches, per-input arguments, errors that name their input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rcattr.attribution.example import Draft
from rcattr.attribution.many import (
    attempt,
    check_on_error,
    checked_target,
    for_input,
    is_count,
    per_input,
    sequence,
    settled,
    token_batches,
)


@settings(max_examples=80, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 50), max_size=12),
    batch_size=st.integers(1, 5),
    budget=st.one_of(st.none(), st.integers(1, 120)),
)
def test_token_batches_are_the_longest_runs_that_fit(
    lengths: list[int], batch_size: int, budget: int | None
) -> None:
    drafts = [(index, Draft(None, [0] * n, [], [])) for index, n in enumerate(lengths)]  # type: ignore[arg-type]
    batches = list(token_batches(drafts, batch_size, budget))
    assert [item for batch in batches for item in batch] == drafts  # consecutive, in order, all of them

    def fits(batch: list) -> bool:
        padded = len(batch) * max(len(draft.ids) for _, draft in batch)
        return len(batch) <= batch_size and (budget is None or padded <= budget or len(batch) == 1)

    assert all(fits(batch) for batch in batches)
    assert not any(fits([*batch, after[0]]) for batch, after in zip(batches, batches[1:], strict=False))


def test_a_count_is_a_whole_number_of_one_or_more() -> None:
    assert is_count(1) and is_count(64)
    assert not any(is_count(value) for value in (0, -2, 1.0, True, "3", None))


def test_per_input_gives_each_input_its_spec() -> None:
    assert per_input("sentence", 3, "granularity") == ["sentence"] * 3
    pairs = [(0, 4), (5, 9)]
    assert per_input(pairs, 2, "granularity") == [pairs, pairs]  # a sequence of pairs is one spec
    assert per_input(["chunk", pairs], 2, "granularity") == ["chunk", pairs]
    with pytest.raises(ValueError, match="granularity gives 2 specs for 3 inputs"):
        per_input(["chunk", "token"], 3, "granularity")
    with pytest.raises(TypeError, match="inputs must be a sequence"):
        sequence("inputs", "one string")


def test_errors_name_their_input_or_are_skipped_with_a_warning() -> None:
    outcomes = [(0, "a"), (1, KeyError("missing")), (2, "c")]
    with pytest.raises(KeyError, match=r"inputs\[1\]: 'missing'"):
        settled(outcomes, "raise")
    with pytest.warns(UserWarning, match=r"inputs\[1\] skipped \(its result is None\): KeyError"):
        assert settled(outcomes, "skip") == [(0, "a"), (2, "c")]
    named = for_input(UnicodeDecodeError("utf-8", b"x", 0, 1, "bad"), 4)  # takes other arguments
    assert isinstance(named, ValueError) and str(named).startswith("inputs[4]: UnicodeDecodeError")
    with pytest.raises(ValueError, match="errors must be one of"):
        check_on_error("ignore")


def test_attempt_returns_the_value_or_the_error() -> None:
    assert attempt(int, "7") == 7
    error = attempt(int, "seven")
    assert isinstance(error, ValueError) and "seven" in str(error)


def test_a_given_answer_is_checked() -> None:
    assert checked_target("Paris.") == "Paris."
    with pytest.raises(TypeError, match="target must be the answer string or None, got int"):
        checked_target(3)
    with pytest.raises(ValueError, match="target is empty"):
        checked_target("  ")
    with pytest.raises(ValueError, match="NUL"):
        checked_target("a\x00b")
