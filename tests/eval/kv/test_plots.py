"""The KV benchmark's figures (rcattr.eval.kv.plots), drawn from a summary."""

from __future__ import annotations

from rcattr.eval.kv.plots import plot_frontiers
from tests.helpers import kv_summary


def test_the_frontiers_are_drawn_to_the_file_named(tmp_path) -> None:
    path = plot_frontiers(kv_summary(), tmp_path / "frontier.png")
    assert path == tmp_path / "frontier.png" and path.read_bytes().startswith(b"\x89PNG")
