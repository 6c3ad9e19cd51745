"""mypy over rcattr as it is installed: ``baselines/`` and ``eval/`` are mapped to ``rcattr.baselines`` and
``rcattr.eval`` by pyproject.toml's package-dir, which mypy cannot follow, so the installed layout is
rebuilt from symbolic links in a temporary folder and checked there as one package."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib  # Python 3.11+, as CI runs

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    with tempfile.TemporaryDirectory() as folder:
        package = Path(folder) / "rcattr"
        package.mkdir()
        for entry in (ROOT / mapping["rcattr"]).iterdir():
            if entry.name != "__pycache__":
                (package / entry.name).symlink_to(entry)
        for name, source in mapping.items():
            if name.count(".") == 1 and not (package / name.split(".")[1]).exists():
                (package / name.split(".")[1]).symlink_to(ROOT / source)
        config, cache = str(ROOT / "pyproject.toml"), str(ROOT / ".mypy_cache")
        command = [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            config,
            "--cache-dir",
            cache,
            "-p",
            "rcattr",
        ]
        return subprocess.run(command, cwd=folder).returncode


if __name__ == "__main__":
    sys.exit(main())
