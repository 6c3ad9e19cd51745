"""Every Python block of README.md and docs/guide/*.md runs as written: a page's blocks in order, as a reader
follows it, in a fresh interpreter on the offline default model (the few it skips are listed with the reason)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
# (page, the block's first line) -> why it does not run here
SKIPPED = {
    (
        "README.md",
        "from rcattr.client import CitationClient",
    ): "talks to a running service (tests/test_client.py)",
    (
        "serve.md",
        "from rcattr.client import CitationClient",
    ): "talks to a running service (tests/test_client.py)",
    ("models.md", "import torch"): "downloads models from the Hugging Face hub",
    (
        "kvcache.md",
        "import kvpress  # registers kvpress's pipeline",
    ): "needs kvpress (tests/kvcache/test_press.py)",
}
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """``(line, code)`` of every Python block of ``page``."""
    text = page.read_text()
    return [(text[: found.start()].count("\n") + 1, found.group(1)) for found in BLOCK.finditer(text)]


def _skipped(page: Path, code: str) -> bool:
    return (page.name, code.splitlines()[0]) in SKIPPED


def test_every_block_parses_and_every_skip_names_a_block() -> None:
    named = set()
    for page in PAGES:
        for line, code in python_blocks(page):
            compile(code, f"{page.name}:{line}", "exec")
            named.add((page.name, code.splitlines()[0]))
    assert set(SKIPPED) <= named


PAGES_WITH_CODE = [page for page in PAGES if any(not _skipped(page, c) for _, c in python_blocks(page))]


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=[page.name for page in PAGES_WITH_CODE])
def test_every_python_block_of_a_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    """In a folder holding the project's ``examples/``, which the snippets read."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    script = "\n".join(
        f"# {page.name}, line {line}\n{code}"
        for line, code in python_blocks(page)
        if not _skipped(page, code)
    )
    (tmp_path / "snippets.py").write_text(script)
    environment = {**os.environ, "MPLBACKEND": "Agg", "TRANSFORMERS_VERBOSITY": "error"}
    run = subprocess.run(
        [sys.executable, "snippets.py"], cwd=tmp_path, capture_output=True, text=True, env=environment
    )
    assert run.returncode == 0, f"{page.name}'s blocks failed:\n{run.stderr[-3000:]}"
