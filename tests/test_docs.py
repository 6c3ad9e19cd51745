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
