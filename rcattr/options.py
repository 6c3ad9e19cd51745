"""The names rcattr's options accept, importable without torch: the CLI parses its arguments (and
answers `--help`) before anything heavy is imported."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Literal, TypeVar

__all__ = [
    "GRANULARITIES",
    "HEAD_SCORES",
    "HTML_SUFFIXES",
    "OUTPUT_GRANULARITIES",
    "TopK",
    "parse_head_count",
    "positive_int",
]

GRANULARITIES: tuple[str, ...] = ("token", "sentence", "chunk")
OUTPUT_GRANULARITIES: tuple[str, ...] = ("answer", "sentence", "token")
HEAD_SCORES: tuple[str, ...] = ("superiority", "rc_std", "rc")
HTML_SUFFIXES: tuple[str, ...] = (".html", ".htm")  # the names an HTML report may have
TopK = int | float | Literal["outliers"]
"""A command line's `--top-k` (and a run's `top_k` setting): a number of heads, a fraction of them, or
`"outliers"`; [`rcattr.heads.selectors.heads_for`][rcattr.heads.selectors.heads_for] turns it into a head selector."""


def parse_head_count(text: str) -> TopK:
    """A head count from the command line: a positive number of heads, or `outliers`."""
    if text == "outliers":
        return "outliers"
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--top-k must be at least 1 or 'outliers', got {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """A whole number >= 1 from the command line (a count: records, tokens, steps)."""
    if not text.strip().lstrip("+").isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return int(text)


Settings = TypeVar("Settings")


def settings_of(kind: type[Settings], args: argparse.Namespace, **given: Any) -> Settings:
    """`kind` (a dataclass of settings) with each field a command line has an argument of the same name for,
    and `given` (what the arguments say otherwise); the dataclass refuses what is out of range."""
    names = {field.name for field in dataclasses.fields(kind)} & vars(args).keys()  # type: ignore[arg-type]
    return kind(**{**{name: getattr(args, name) for name in names}, **given})
