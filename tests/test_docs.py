"""The design document the code cites exists and has every section cited."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_design_reference_names_a_section_that_exists() -> None:
    sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "design.md").read_text(), flags=re.M))
    cited = set()
    for folder in ("rcattr", "eval", "baselines", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            cited |= set(re.findall(r"docs/design\.md §(\d+)", path.read_text()))
    for path in (ROOT / "README.md", ROOT / "Makefile"):
        cited |= set(re.findall(r"docs/design\.md §(\d+)", path.read_text()))
    assert cited and cited <= sections
    assert not [path for path in (ROOT / "rcattr").rglob("*.py") if "DESIGN §" in path.read_text()]


def test_the_front_page_is_short_and_links_pages_that_exist() -> None:
    """Issue 76: the README is a front page (at most 250 lines); the guide, benchmarks and reference are docs/
    pages (mkdocs.yml's nav, built by ``make docs``), and every page the README links to exists."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    linked = re.findall(r"\]\(((?:docs/)?[\w/.-]+\.md)(?:#[\w-]+)?\)", readme)
    assert linked and all((ROOT / path).is_file() for path in linked)
    nav = set(re.findall(r": ([\w/.-]+\.md)$", (ROOT / "mkdocs.yml").read_text(), flags=re.M))
    pages = {str(path.relative_to(ROOT / "docs")) for path in (ROOT / "docs").rglob("*.md")}
    assert nav == {page for page in pages if not page.startswith("records/")}
