"""What the benchmark runners share: their common command-line arguments and resuming a run folder."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def add_run_arguments(parser: argparse.ArgumentParser, methods: Sequence[str]) -> None:
    """``--out``, ``--limit`` and ``--methods`` (comma-separated, from ``methods``)."""
    parser.add_argument("--out", required=True, help="output folder (resumes a run already there)")
    parser.add_argument("--limit", type=int, help="first N records only")
    parser.add_argument(
        "--methods",
        default=",".join(methods),
        help=f"comma-separated, from {', '.join(methods)} (default: all)",
    )


def check_methods(methods: Sequence[str], known: Sequence[str]) -> None:
    """ValueError naming the unknown methods and the known ones."""
    unknown = [name for name in methods if name not in known]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(known)}")


def parse_methods(text: str, known: Sequence[str]) -> tuple[str, ...]:
    """The names of a ``--methods`` value; unknown ones end the command with the list of known ones."""
    methods = tuple(name.strip() for name in text.split(",") if name.strip())
    try:
        check_methods(methods, known)
    except ValueError as error:
        raise SystemExit(str(error)) from error
    return methods


def claim_run_folder(out: Path, settings: dict[str, Any], resumable: Sequence[str]) -> None:
    """Write ``settings`` to ``out/config.json``; refuse a folder whose run has other settings, but for the
    keys in ``resumable`` (which a resumed run may change, e.g. adding methods)."""
    path = out / "config.json"
    if path.exists():
        previous = json.loads(path.read_text())
        changed = sorted(
            key for key in settings if key not in resumable and previous.get(key) != settings[key]
        )
        if changed:
            raise ValueError(f"{out} holds a run with other settings ({', '.join(changed)}); use a new --out")
    path.write_text(json.dumps(settings, indent=2))
