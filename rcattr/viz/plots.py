"""Figures of a result: every head's score as in the paper's Fig. 4 with the selected heads outlined, and
each answer token's support by the context."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rcattr.grounding.support import SUPPORT_THRESHOLD
from rcattr.grounding.vouching import unsupported_tokens
from rcattr.record.record import AttributionRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes

HeadsLike = torch.Tensor | np.ndarray | Sequence[tuple[int, int]]

"""`[k, 2]` `(layer, head)` pairs."""


def _head_scores(
    scores_or_result: AttributionRecord | torch.Tensor | np.ndarray, selected: HeadsLike | None
) -> tuple[np.ndarray, np.ndarray, str]:
    """`[L, H]` scores, `[k, 2]` selected heads and the score's name, checked."""
    kind = "head score"
    if isinstance(scores_or_result, AttributionRecord):
        selection = scores_or_result.head_selection
        if selection is None:
            raise ValueError(f"a {scores_or_result.span_scorer!r} result has no head scores to plot")
        scores_or_result, kind = selection.scores, selection.kind
        selected = selection.heads if selected is None else selected
    scores = torch.as_tensor(scores_or_result).detach().float().cpu().numpy()
    if scores.ndim != 2:
        raise ValueError(f"head scores must be [layers, heads], got shape {tuple(scores.shape)}")
    heads = torch.as_tensor([] if selected is None else selected).cpu().numpy()
    if heads.size == 0:
        heads = heads.reshape(0, 2)
    if heads.ndim != 2 or heads.shape[1] != 2:
        raise ValueError(f"selected must be [k, 2] (layer, head) pairs, got shape {tuple(heads.shape)}")
    if heads.size and ((heads < 0).any() or (heads >= scores.shape).any()):
        raise ValueError(f"selected heads {heads.tolist()} fall outside the {scores.shape} score table")
    return scores, heads, kind


def plot_head_scores(
    scores_or_result: AttributionRecord | torch.Tensor | np.ndarray,
    *,
    selected: HeadsLike | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    label: str | None = None,
) -> Axes:
    """Heat map of every head's score (x = head, y = layer), the selected heads outlined (paper Fig. 4).

    Parameters
    ----------
    scores_or_result : AttributionRecord or Tensor or ndarray, shape [L, H]
        A result (its `head_selection` is drawn) or a table of head scores.
    selected : Tensor or ndarray or sequence of (layer, head), shape [k, 2], optional
        Heads to outline. Default: the result's selected heads, or none for a table.
    ax : matplotlib Axes, optional
        Where to draw. Default: a new pyplot figure.
    title : str, optional
    label : str, optional
        Colour bar label; default: the name of the head score.

    Returns
    -------
    matplotlib Axes
    """
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator

    scores, heads, kind = _head_scores(scores_or_result, selected)
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.figure(figsize=(1.5 + 0.35 * scores.shape[1], 1.5 + 0.25 * scores.shape[0])).subplots()
    image = ax.imshow(scores, origin="lower", aspect="auto", cmap="viridis", interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label=label or kind)
    for layer, head in heads.tolist():
        ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.5))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    if title:
        ax.set_title(title)
    return ax


def plot_token_support(
    result: AttributionRecord,
    *,
    threshold: float = SUPPORT_THRESHOLD,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Bars of each answer token's support log-odds (`logit(token_support)`: its log-probability plus the
    log-odds of its peak; below 0 the evidence is against the context holding it), the cut-off drawn, the
    tokens flagged unsupported in red.

    Returns
    -------
    matplotlib Axes
    """
    if result.token_support is None:
        raise ValueError("this result has no token_support (baselines have none): explain with RCAttributor")
    eps = 1e-6
    log_odds = torch.logit(result.token_support.double().clamp(eps, 1 - eps)).tolist()
    flagged = set(unsupported_tokens(result, threshold))
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.figure(figsize=(max(6.0, 0.28 * len(log_odds)), 3.2)).subplots()
    colours = ["#dc2626" if index in flagged else "#9ca3af" for index in range(len(log_odds))]
    ax.bar(range(len(log_odds)), log_odds, color=colours)
    cut = float(torch.logit(torch.tensor(threshold, dtype=torch.float64).clamp(eps, 1 - eps)))
    ax.axhline(cut, color="#dc2626", linestyle="--", linewidth=1, label=f"cut-off: support {threshold:.2f}")
    ax.axhline(0, color="#6b7280", linewidth=0.6)
    tokens = [token.text.strip() or "␣" for token in result.answer_tokens]
    ax.set_xticks(range(len(log_odds)), tokens, rotation=90)
    ax.set_xlim(-0.6, len(log_odds) - 0.4)
    ax.set_ylabel("support log-odds")
    ax.legend(loc="lower left", frameon=False)
    if title:
        ax.set_title(title)
    return ax


def save_head_heatmap(
    scores_or_result: AttributionRecord | torch.Tensor | np.ndarray,
    path: str | os.PathLike[str],
    **kw: Any,
) -> Path:
    """Write [`plot_head_scores`][rcattr.viz.plots.plot_head_scores] (keyword arguments passed on) to `path`, in the image format its
    extension names (`.png`, `.jpg`, `.svg`, `.pdf`, ...); returns the path.

    The figure is made without pyplot, so no window opens and no figure is left behind.
    """
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 5), layout="constrained")
    path = Path(path)
    formats = figure.canvas.get_supported_filetypes()
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in formats:
        raise ValueError(
            f"cannot tell an image format from {path.name!r}; end the name with one of "
            f"{', '.join('.' + name for name in sorted(formats))}"
        )
    plot_head_scores(scores_or_result, ax=figure.subplots(), **kw)
    figure.savefig(path, format=suffix, dpi=120)
    return path
