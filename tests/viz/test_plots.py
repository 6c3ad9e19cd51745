"""The plots (rcattr.viz.plots): the head heat map and the token support bars, drawn and saved."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
import torch

from rcattr.viz import (
    plot_head_scores,
    plot_token_support,
    save_head_heatmap,
    save_html,
)
from tests.helpers.results import hand_made_result

matplotlib.use("Agg")


def test_head_heatmap_outlines_the_selected_heads() -> None:
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    result = hand_made_result()
    ax = plot_head_scores(result, title="heads")
    outlines = [patch for patch in ax.patches if isinstance(patch, Rectangle)]
    assert ax.images[0].get_array().shape == (4, 3)
    assert [outline.get_xy() for outline in outlines] == [(0.5, -0.5), (1.5, 2.5)]  # (head, layer) - 0.5
    assert ax.figure.axes[-1].get_ylabel() == "superiority"
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("head", "layer", "heads")
    plt.close(ax.figure)

    given = Figure().subplots()
    ax = plot_head_scores(result.head_selection.scores.numpy(), selected=[(1, 1)], ax=given)
    assert ax is given
    assert sum(isinstance(patch, Rectangle) for patch in ax.patches) == 1


@pytest.mark.parametrize(
    ("scores", "selected"),
    [(torch.rand(4), None), (torch.rand(4, 3), [(4, 0)]), (torch.rand(4, 3), [1, 2, 3])],
)
def test_head_heatmap_rejects_bad_shapes(scores: torch.Tensor, selected: list | None) -> None:
    with pytest.raises(ValueError):
        plot_head_scores(scores, selected=selected)


def test_save_functions_write_files(tmp_path: Path) -> None:
    result = hand_made_result()
    page = save_html(result, tmp_path / "result.html", title="saved")
    image = save_head_heatmap(result, tmp_path / "heads.png")
    assert "saved" in page.read_text(encoding="utf-8")
    assert image.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("suffix", "magic"),
    [
        (".png", b"\x89PNG"),
        (".jpg", b"\xff\xd8"),
        (".JPEG", b"\xff\xd8"),
        (".pdf", b"%PDF"),
        (".svg", b"<?xml"),
    ],
)
def test_head_heatmap_writes_the_format_its_name_says(tmp_path: Path, suffix: str, magic: bytes) -> None:
    path = save_head_heatmap(hand_made_result(), tmp_path / f"heads{suffix}")
    assert path.read_bytes().startswith(magic)


def test_head_heatmap_refuses_an_unknown_extension(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot tell an image format from 'heads.xyz'"):
        save_head_heatmap(hand_made_result(), tmp_path / "heads.xyz")


def test_token_support_plot_draws_a_bar_per_token_and_the_flagged_ones_red() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import to_hex

    result = hand_made_result()
    ax = plot_token_support(result, threshold=0.5)
    colours = [to_hex(bar.get_facecolor()) for bar in ax.patches]
    assert len(colours) == len(result.answer_tokens)
    assert (
        [i for i, c in enumerate(colours) if c == "#dc2626"] == result.unsupported_tokens(0.5) == [0, 1, 3]
    )  # "330" (2) is below 0.5 too, but the documents hold it whole
    assert [label.get_text() for label in ax.get_xticklabels()][:3] == ["It", "is", "330"]
    result.rc = None
    with pytest.raises(ValueError, match="token_support"):
        plot_token_support(result)
