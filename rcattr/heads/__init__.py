"""Attention heads: every head's score (scores), the selection an attribution used (selection: HeadSelection)
and the strategies that select heads (selectors: OutlierHeads, TopHeads, FixedHeads)."""

from typing import Any

from rcattr.moved import moved_name


def __getattr__(name: str) -> Any:
    """The names of the module `rcattr.heads` before it became this package (rcattr.heads.scores), with a
    DeprecationWarning, until rcattr 0.3.0."""
    return moved_name(__name__, name)
