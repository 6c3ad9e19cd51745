"""One version (rcattr.version): the package, its metadata, the CHANGELOG's newest release and rcattr.moved's
wording agree."""

from __future__ import annotations

import re
from importlib.metadata import version

import rcattr
from rcattr import moved
from tests.helpers.layout import PACKAGE


def test_the_package_and_its_metadata_have_one_version() -> None:
    assert rcattr.__version__ == rcattr.version.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", rcattr.__version__)
    pyproject = (PACKAGE.parent / "pyproject.toml").read_text()
    assert 'version = {attr = "rcattr.version.__version__"}' in pyproject and '\nversion = "' not in pyproject
    assert version("rcattr") == rcattr.__version__  # the installed metadata (an editable install: make setup)


def test_the_changelog_s_newest_release_is_this_version_and_dated() -> None:
    releases = re.findall(
        r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d\d-\d\d)$", (PACKAGE.parent / "CHANGELOG.md").read_text(), re.M
    )
    assert releases and releases[0][0] == rcattr.__version__


def test_the_moved_paths_name_this_release_and_the_next() -> None:
    major, minor, _ = (int(part) for part in rcattr.__version__.split("."))
    assert moved.MOVED_IN == rcattr.__version__ and moved.REMOVED_IN == f"{major}.{minor + 1}.0"
    assert f"moved in rcattr {moved.MOVED_IN}" in (moved.__doc__ or "")
    assert f"until rcattr {moved.REMOVED_IN}" in (moved.__doc__ or "")
