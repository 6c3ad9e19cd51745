"""Many inputs at once ([`attribute_many`][rcattr.attribution.base.SpanAttributor.attribute_many]): the arguments given per input, and
an error that names the input it came from."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeAlias, TypeGuard, TypeVar, cast

import numpy as np

from rcattr.attribution.example import Draft, SpanSpec
from rcattr.text.prompting import check_text

OnError: TypeAlias = Literal["raise", "skip"]
ON_ERROR = ("raise", "skip")
Outcome = TypeVar("Outcome")


def is_count(value: object) -> bool:
    """Whether `value` is a whole number >= 1 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def token_batches(
    drafts: Sequence[tuple[int, Draft]], batch_size: int, max_tokens: int | None
) -> Iterator[list[tuple[int, Draft]]]:
    """Consecutive batches of `drafts`: at most `batch_size` of them and, but for a lone one, at most
    `max_tokens` padded prompt tokens (their number times the longest prompt)."""
    batch: list[tuple[int, Draft]] = []
    longest = 0
    for item in drafts:
        length = max(longest, len(item[1].ids))
        if batch and (
            len(batch) == batch_size or (max_tokens is not None and length * (len(batch) + 1) > max_tokens)
        ):
            yield batch
            batch, length = [], len(item[1].ids)
        batch.append(item)
        longest = length
    if batch:
        yield batch


def sequence(argument: str, value: Any) -> list[Any]:
    """`value` as a list, refused when it is not a sequence of items (a single string or input)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(
            f"{argument} must be a sequence (one item per example), got {type(value).__name__}; "
            "for a single example call attribute()"
        )
    return list(value)


def per_input(spec: SpanSpec | Sequence[SpanSpec], n_inputs: int, argument: str) -> list[SpanSpec]:
    """One span spec per input: `spec` for each, or `spec`'s own items when each is a name or a sequence
    of `(start, end)` pairs (a sequence of pairs itself is one spec for every input)."""
    if not _are_specs(spec):
        return [cast(SpanSpec, spec)] * n_inputs
    if len(spec) != n_inputs:
        raise ValueError(f"{argument} gives {len(spec)} specs for {n_inputs} inputs; give one per input")
    return list(spec)


def _are_specs(spec: SpanSpec | Sequence[SpanSpec]) -> TypeGuard[Sequence[SpanSpec]]:
    """Whether `spec` is a non-empty sequence of specs: names, or sequences of pairs (not of numbers)."""
    return (
        not isinstance(spec, str)
        and len(spec) > 0
        and all(
            isinstance(item, str)
            or (isinstance(item, Sequence) and not any(isinstance(pair, (int, np.integer)) for pair in item))
            for item in spec
        )
    )


def checked_target(target: object) -> str:
    """A given answer, refused when it is not a non-empty string of usable text."""
    if not isinstance(target, str):
        raise TypeError(f"target must be the answer string or None, got {type(target).__name__}")
    check_text("target", target)
    if not target.strip():
        raise ValueError("target is empty; give the answer to explain, or None to generate it")
    return target


def attempt(call: Callable[..., Outcome], *args: Any) -> Outcome | Exception:
    """`call(*args)`, or the exception it raised (one bad input: attribute_many names it, then raises or skips
    it)."""
    try:
        return call(*args)
    except Exception as error:
        return error


def check_on_error(errors: object) -> None:
    if errors not in ON_ERROR:
        raise ValueError(f"errors must be one of {list(ON_ERROR)}, got {errors!r}")


def settled(
    outcomes: Sequence[tuple[int, Outcome | Exception]], errors: OnError
) -> list[tuple[int, Outcome]]:
    """`(index, outcome)` pairs without their errors: the first raised, named by its input, or each skipped
    with a warning (`errors="skip"`)."""
    for index, outcome in outcomes:
        if isinstance(outcome, Exception):
            if errors == "raise":
                raise for_input(outcome, index)
            skipped(outcome, index)
    return [(index, outcome) for index, outcome in outcomes if not isinstance(outcome, Exception)]


def for_input(error: Exception, index: int) -> Exception:
    """`error` with its message prefixed by the input it came from, `inputs[index]`: of the same type,
    or a ValueError naming it when that type takes other arguments."""
    message = f"inputs[{index}]: {error}"
    try:
        named = type(error)(message)
    except Exception:
        named = ValueError(f"inputs[{index}]: {type(error).__name__}: {error}")
    named.__cause__ = error
    return named


class SkippedInputWarning(UserWarning):
    """The warning that `inputs[index]` of [`attribute_many`][rcattr.attribution.base.SpanAttributor.attribute_many] got no result
    (`errors="skip"`): `index` names the input, `error` is the exception that stopped it (a caller that
    records warnings, as the citation service does, answers that input with it)."""

    def __init__(self, message: str, index: int, error: Exception) -> None:
        super().__init__(message)
        self.index = index
        self.error = error


def skipped(error: Exception, index: int) -> None:
    """Warn that `inputs[index]` gets no result (`errors="skip"`) and why."""
    message = f"inputs[{index}] skipped (its result is None): {type(error).__name__}: {error}"
    warnings.warn(SkippedInputWarning(message, index, error), stacklevel=5)  # the caller of attribute_many()
