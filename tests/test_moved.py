"""The module paths that moved in 0.2.0 still import, as the new modules themselves, with a DeprecationWarning
that names the new path and points at the importing line (rcattr.moved)."""

from __future__ import annotations

import importlib
import importlib.util
import pickle
import subprocess
import sys
import warnings

import pytest

from rcattr.moved import MOVED_MODULES, MOVED_NAMES, RENAMED_NAMES, MovedModules


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_every_old_path_imports_the_new_module_with_a_warning(monkeypatch, old: str, new: str) -> None:
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(
        DeprecationWarning, match=rf"^{old} moved to {new}: import it from there \(.*0\.3\.0\)$"
    ):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new) and sys.modules[old] is module


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_only_paths_that_no_longer_exist_are_answered(monkeypatch, old: str, new: str) -> None:
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, MovedModules)])
    monkeypatch.delitem(sys.modules, old, raising=False)
    assert importlib.util.find_spec(new) is not None
    assert importlib.util.find_spec(old) is None  # the finder never shadows a module that is there


def test_the_warning_points_at_the_line_that_imports(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "rcattr.selectors", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from rcattr.selectors import TopHeads
    from rcattr.heads.selectors import TopHeads as moved

    assert TopHeads is moved
    assert [(warning.category, warning.filename) for warning in caught] == [(DeprecationWarning, __file__)]


def test_the_old_names_of_rcattr_heads_come_from_its_scores_module() -> None:
    module, names = MOVED_NAMES["rcattr.heads"]
    scores = importlib.import_module(module)
    for name in names:
        with pytest.warns(DeprecationWarning, match=rf"^rcattr\.heads\.{name} moved to {module}\.{name}"):
            value = getattr(importlib.import_module("rcattr.heads"), name)
        assert value is getattr(scores, name)
    with pytest.raises(AttributeError, match="module 'rcattr.heads' has no attribute 'nothing'"):
        importlib.import_module("rcattr.heads").nothing  # noqa: B018


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED_NAMES.items()))
def test_a_renamed_class_answers_its_old_name_with_a_warning_from_the_users_line(old: str, new: str) -> None:
    module, _, name = old.rpartition(".")
    new_module, _, new_name = new.rpartition(".")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(importlib.import_module(module), name)
    assert value is getattr(importlib.import_module(new_module), new_name)
    assert [(w.category, w.filename) for w in caught] == [(DeprecationWarning, __file__)]
    assert str(caught[0].message).startswith(f"{old} is now {new}") and "0.3.0" in str(caught[0].message)
    with pytest.raises(AttributeError, match=f"module '{module}' has no attribute 'nothing'"):
        importlib.import_module(module).nothing  # noqa: B018


def test_a_pickle_that_names_an_old_path_loads(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "rcattr.selectors", raising=False)
    with pytest.warns(DeprecationWarning, match="rcattr.selectors moved"):
        loaded = pickle.loads(b"crcattr.selectors\nTopHeads\n.")  # protocol 0: the class by its module path
    from rcattr.heads.selectors import TopHeads

    assert loaded is TopHeads


def test_a_script_shows_the_warning_under_python_s_default_filters() -> None:
    script = "from rcattr.citations import Citation; print(Citation.__module__)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "rcattr.grounding.citations"
    assert (
        "<string>:1: DeprecationWarning: rcattr.citations moved to rcattr.grounding.citations: import it from there"
        in done.stderr
    )


def test_the_changelog_lists_every_moved_path() -> None:
    """The table of CHANGELOG.md (``rcattr.a``, ``.b`` -> ``rcattr.x.a``, ``.b``) is MOVED_MODULES, with the old
    module rcattr.heads."""
    from tests.helpers.layout import PACKAGE

    moves = set()
    for line in (PACKAGE.parent / "CHANGELOG.md").read_text().splitlines():
        cells = line.strip("|").split("|")
        if len(cells) != 2 or "`rcattr." not in cells[0]:
            continue
        old, new = ([name.strip(" `") for name in cell.split(",")] for cell in cells)
        old_base, new_base = old[0].rsplit(".", 1)[0], new[0].rsplit(".", 1)[0]
        for before, after in zip(old, new, strict=True):
            moves.add(
                (
                    before if before.startswith("rcattr") else old_base + before,
                    after if after.startswith("rcattr") else new_base + after,
                )
            )
    assert moves == {*MOVED_MODULES.items(), ("rcattr.heads", MOVED_NAMES["rcattr.heads"][0])}
