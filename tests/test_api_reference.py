"""The API reference (docs/api/*.md, built by mkdocs + mkdocstrings) is complete and clean: the site builds with
`--strict` (no unresolved cross-reference), no page shows a raw Sphinx role, every public name of the packages a
user imports from is documented, and nothing private is named. One build for the module (a few seconds)."""

from __future__ import annotations

import html
import importlib
import os
import re
import subprocess
import sys
import warnings
import zlib
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("mkdocs")  # the docs extra; absent from the kvpress environment
pytest.importorskip("mkdocstrings_handlers.python")

ROOT = Path(__file__).resolve().parents[1]
# the packages a user imports from: each name of their __all__ has an entry in the reference
PUBLIC_MODULES = (
    "rcattr",
    "rcattr.kvcache",
    "rcattr.baselines",
    "rcattr.viz",
    "rcattr.serve",
    "rcattr.client",
)
# what the reference must document beyond those names (any one path of each): the methods the quick start
# calls, which RCAttributor inherits; the base of every method (docs/extending.md); the kvpress press,
# which is not in rcattr.kvcache's __all__ (it imports kvpress); what a kvcache rule decides on
REQUIRED = (
    ("rcattr.RCAttributor.attribute", "rcattr.attribution.attributor.RCAttributor.attribute"),
    ("rcattr.RCAttributor.attribute_many", "rcattr.attribution.attributor.RCAttributor.attribute_many"),
    ("rcattr.RCAttributor.check_input", "rcattr.attribution.attributor.RCAttributor.check_input"),
    ("rcattr.attribution.base.SpanAttributor",),
    ("rcattr.kvcache.RCPress", "rcattr.kvcache.press.RCPress"),
    ("rcattr.kvcache.scored.Scored",),
)
# the numpydoc sections griffe reads into tables (Notes, References and See Also are admonitions by design); one
# it did not read shows as a heading (the title over dashes), an admonition or a code block
SECTIONS = (
    "Parameters",
    "Other Parameters",
    "Returns",
    "Yields",
    "Receives",
    "Raises",
    "Warns",
    "Attributes",
)
SECTIONS += ("Examples", "Methods", "Functions", "Classes", "Modules")
RAW_ROLE = re.compile(r":(?:class|meth|func|mod|attr|data):")
# a dotted name with a private component (`rcattr.stats._grid`), not a dunder (`.__call__`)
PRIVATE = re.compile(r"[\w.]*\._(?!_\w*__\b)\w+")


class _Text(HTMLParser):
    """A page's visible text (scripts and styles left out), the targets of its links and anchors, and the text
    of each of its headings (and admonition titles) and preformatted blocks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.targets: list[str] = []
        self.headings: list[str] = []
        self.blocks: list[str] = []
        self._hidden = 0
        self._open: list[list[str]] = []  # the heading or block being read, innermost last

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._hidden += 1
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6", "summary", "pre"):
            self._open.append([tag])
        self.targets.extend(value for name, value in attrs if name in ("href", "id") and value)
        self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._hidden -= 1
        if self._open and self._open[-1][0] == tag:
            opened, *text = self._open.pop()
            (self.blocks if opened == "pre" else self.headings).append("".join(text))
        self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)
            for reading in self._open:
                reading.append(data)


class Site:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pages: dict[str, _Text] = {}
        for path in sorted(folder.rglob("*.html")):
            parser = _Text()
            parser.feed(path.read_text(encoding="utf-8"))
            self.pages[path.relative_to(folder).as_posix()] = parser
        self.inventory = read_inventory(folder / "objects.inv")
        self.returncode: int = 0
        self.problems: list[str] = []

    def text(self, page: str) -> str:
        return "".join(self.pages[page].parts)

    @property
    def api_pages(self) -> list[str]:
        return [page for page in self.pages if page.startswith("api/")]


def read_inventory(path: Path) -> set[str]:
    """The identifiers of a Sphinx inventory (version 2): four header lines, then zlib-compressed lines
    `name domain:role priority uri display-name`."""
    with path.open("rb") as file:
        header = [file.readline() for _ in range(4)]
        assert header[0].startswith(b"# Sphinx inventory version 2"), header[0]
        body = zlib.decompress(file.read()).decode("utf-8")
    return {line.split(" ", 1)[0] for line in body.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The site, built once with `--strict`: mkdocs writes every page before it aborts on a warning, so the
    other checks run whatever the warnings (test_the_site_builds_without_a_warning reports them)."""
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    problems = [line for line in built.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    if not (folder / "objects.inv").is_file():
        pytest.fail("mkdocs build failed:\n" + "\n".join(problems or built.stderr.splitlines()[-40:]))
    result = Site(folder)
    result.returncode, result.problems = built.returncode, problems
    return result


def public_names(module: ModuleType) -> list[str]:
    """`__all__`, or for a module without one the public names it defines."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    ]


def documented_as(module: str, name: str, inventory: set[str]) -> bool:
    """Whether `module.name` has an entry: under that path, its object's own (`__module__.__qualname__`), or
    any path that names the same object (a constant, under the module that defines it)."""
    if f"{module}.{name}" in inventory:
        return True
    try:
        value: Any = getattr(importlib.import_module(module), name)
    except ImportError:  # an optional dependency (the serve extra): any path that ends in the name
        return any(entry.startswith(f"{module}.") and entry.endswith(f".{name}") for entry in inventory)
    owner, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if isinstance(owner, str) and isinstance(qualname, str) and f"{owner}.{qualname}" in inventory:
        return True
    for entry in inventory:
        parent, _, last = entry.rpartition(".")
        if last == name and parent.startswith("rcattr"):
            try:
                with warnings.catch_warnings():  # a module path that moved still imports, with a warning
                    warnings.simplefilter("ignore", DeprecationWarning)
                    if getattr(importlib.import_module(parent), name, None) is value:
                        return True
            except ImportError:
                continue
    return False


def test_the_site_builds_without_a_warning(site: Site) -> None:
    """`mkdocs build --strict` passes: every cross-reference `[name][rcattr.path]` of a docstring or a page
    resolves, every `:::` entry is found, and griffe reads every docstring."""
    assert site.returncode == 0, "mkdocs build --strict:\n" + "\n".join(site.problems)


def test_no_page_shows_a_sphinx_role(site: Site) -> None:
    shown = {page: RAW_ROLE.findall(site.text(page)) for page in site.pages}
    assert not {page: roles for page, roles in shown.items() if roles}


def test_every_public_name_is_documented(site: Site) -> None:
    missing = [
        f"{module}.{name}"
        for module in PUBLIC_MODULES
        for name in public_names(importlib.import_module(module))
        if not documented_as(module, name, site.inventory)
    ]
    missing += [paths[0] for paths in REQUIRED if not site.inventory & set(paths)]
    assert not missing, f"no entry in the API reference (docs/api/*.md) for {missing}"


def test_nothing_private_is_named(site: Site) -> None:
    assert not sorted(entry for entry in site.inventory if PRIVATE.search(entry))
    named = {
        page: sorted(
            set(PRIVATE.findall(site.text(page))) | {t for t in site.pages[page].targets if PRIVATE.search(t)}
        )
        for page in site.api_pages
    }
    assert not {page: found for page, found in named.items() if found}
    anywhere = [
        path.relative_to(site.folder).as_posix()
        for path in site.folder.rglob("*")
        if path.is_file()
        and path.suffix in (".html", ".json", ".xml", ".txt")
        and "rcattr.viz._pieces" in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert not anywhere and not any("rcattr.viz._pieces" in entry for entry in site.inventory)


def test_no_cross_reference_is_shown_unresolved(site: Site) -> None:
    """A Markdown cross-reference that mkdocstrings could not turn into a link (one in a code span, a default or
    a section griffe did not parse) shows as written: `[name][rcattr.path]`."""
    shown = {
        page: re.findall(r"\]\[rcattr[\w.]*\]", html.unescape(site.text(page))) for page in site.api_pages
    }
    assert not {page: found for page, found in shown.items() if found}


def test_every_docstring_section_is_read(site: Site) -> None:
    """A numpydoc section indented apart from its docstring is not read: it shows as a Markdown heading, a
    collapsible admonition or a code block instead of the section's table."""
    unread = {
        page: [
            text.strip()
            for text in [*site.pages[page].headings, *site.pages[page].blocks]
            if text.replace("\u00b6", "").strip() in SECTIONS
            or re.search(rf"^\s*(?:{'|'.join(SECTIONS)})\s*\n\s*-{{3,}}\s*$", text, flags=re.M)
        ]
        for page in site.api_pages
    }
    assert not {page: found for page, found in unread.items() if found}
