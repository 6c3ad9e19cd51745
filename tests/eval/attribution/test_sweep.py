"""The sweep of head counts (rcattr.eval.attribution.sweep): its accuracy-against-k figure."""

from __future__ import annotations

from rcattr.eval.attribution.sweep import plot_sweep

RESULTS = {
    "total_heads": 12,
    "config": {"dataset": "quotesum", "split": "dev"},
    "model": "tiny",
    "sweep": {"rc/top/1": 0.5, "rc/top/all": 0.7, "rc/bottom/1": 0.2, "attention/top/2": 0.6},
}


def test_the_figure_is_drawn_to_the_file_named(tmp_path) -> None:
    path = plot_sweep(RESULTS, tmp_path / "sweep.png")
    assert path == tmp_path / "sweep.png" and path.read_bytes().startswith(b"\x89PNG")
    other = plot_sweep({**RESULTS, "heads": {"rc/top/3": 0.4}}, tmp_path / "heads.pdf", method="heads")
    assert other.read_bytes().startswith(b"%PDF")
