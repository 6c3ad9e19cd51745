"""Names imported on first use (rcattr.lazy)."""

from __future__ import annotations

import sys
import types

import pytest

from rcattr.lazy import lazy_exports


@pytest.fixture
def package(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A package ``lazy_test`` whose ``ceil`` comes from ``math`` and ``json_dumps`` nowhere."""
    module = types.ModuleType("lazy_test")
    monkeypatch.setitem(sys.modules, "lazy_test", module)
    module.__getattr__, module.__dir__, module.__all__ = lazy_exports(
        "lazy_test", {"math": ["ceil", "floor"]}
    )
    return module


def test_a_name_is_imported_on_first_use_and_kept(package: types.ModuleType) -> None:
    import math

    assert package.__all__ == ["ceil", "floor"]
    assert "ceil" not in vars(package)
    assert package.ceil is math.ceil
    assert vars(package)["ceil"] is math.ceil  # set on the package: the next use is a plain attribute
    assert {"ceil", "floor"} <= set(dir(package))


def test_an_unknown_name_is_an_attribute_error(package: types.ModuleType) -> None:
    with pytest.raises(AttributeError, match="module 'lazy_test' has no attribute 'round'"):
        package.round  # noqa: B018


def test_relative_modules_resolve_against_the_package() -> None:
    getattr_, _, names = lazy_exports("rcattr", {".options": ["parse_head_count"]})
    from rcattr.options import parse_head_count

    assert names == ["parse_head_count"] and getattr_("parse_head_count") is parse_head_count
