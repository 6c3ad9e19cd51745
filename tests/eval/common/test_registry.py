"""A benchmark's methods by name (rcattr.eval.common.registry)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rcattr.eval.common.registry import MethodRegistry, check_methods


@dataclass(frozen=True)
class Method:
    name: str


def test_methods_keep_the_order_they_were_added_in() -> None:
    registry = MethodRegistry([Method("b"), Method("a")], reserved=("full",))
    added = registry.add(Method("c"))
    assert added == Method("c") and list(registry) == ["b", "a", "c"] and len(registry) == 3
    assert registry["a"] == Method("a") and "full" not in registry


@pytest.mark.parametrize("name", ["a", "full"])
def test_a_taken_or_reserved_name_is_refused(name: str) -> None:
    registry = MethodRegistry([Method("a")], reserved=("full",))
    with pytest.raises(ValueError, match="built-in or reserved"):
        registry.add(Method(name))


def test_unknown_methods_are_named_with_the_known_ones() -> None:
    check_methods(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="unknown method.*x, y; choose from a, b"):
        check_methods(["a", "x", "y"], ["a", "b"])
