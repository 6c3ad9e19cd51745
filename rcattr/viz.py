"""Views of an :class:`~rcattr.result.RCAttributionResult`: an HTML page, terminal text and head heat maps.

The HTML page and the terminal view shade every context span by its score, for the whole answer
or for one output unit; the page also underlines each answer token by how little it draws on the
context (1 - groundedness) and marks the tokens the context does not support
(:meth:`~rcattr.result.RCAttributionResult.unsupported_tokens`: token support below the cut-off chosen
on the unsupported-tokens benchmark). The heat map shows every head's score as in the paper's Fig. 4, with the
selected heads outlined.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rcattr.result import SUPPORT_THRESHOLD, RCAttributionResult
from rcattr.segmentation import TextSpan, one_line

if TYPE_CHECKING:
    from matplotlib.axes import Axes

_Piece = tuple[int, int, int | None]  # (start, end, index): characters and their span (None in a gap)
HeadsLike = torch.Tensor | np.ndarray | Sequence[tuple[int, int]]
"""``[k, 2]`` ``(layer, head)`` pairs."""

_ANSI_RAMP = (230, 229, 228, 227, 221, 215, 209, 203)  # 256-colour backgrounds, pale yellow to red
_MIN_SHADE = 0.1  # intensities below this (shares below 1%) stay unshaded in the terminal
_OPEN_DOCUMENTS = 10  # with more than this many documents, the HTML page opens only the highest-scoring ones
_CSS = """
body{font:15px/1.6 system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}
.text{white-space:pre-wrap;border:1px solid #ddd;border-radius:4px;padding:.5em .8em}
.u{cursor:pointer;border-radius:3px}.u:hover,.u.active{outline:2px solid #f59e0b}
.g{text-decoration:underline dotted rgba(220,38,38,var(--u));text-decoration-thickness:2px}
.g.low{background:rgba(220,38,38,.12)}.s{border-radius:2px}
.legend,#showing,.share{color:#666;font-size:.85em}table{border-collapse:collapse}
summary{cursor:pointer}summary h3{display:inline;margin:0}details.chunk{margin:.6em 0}
td,th{border-bottom:1px solid #eee;padding:.2em .6em;text-align:left;vertical-align:top}
"""
_JS = """
const data = JSON.parse(document.getElementById("rc-data").textContent);
const spans = [...document.querySelectorAll(".s")], units = [...document.querySelectorAll(".u")];
const list = document.getElementById("unit-sources");
let pinned = null;
function show(u) {
  const scores = u === null ? data.seq : data.units[u];
  for (const el of spans) {
    const s = scores[+el.dataset.i];
    el.style.background = `rgba(255,140,0,${(0.85 * Math.sqrt(Math.min(Math.max(s, 0), 1))).toFixed(3)})`;
    el.title = `score ${s.toFixed(3)}`;
  }
  document.getElementById("showing").textContent = u === null ? "whole answer" : `output ${u + 1}`;
  for (const el of units) el.classList.toggle("active", +el.dataset.u === u);
  list.replaceChildren();
  if (u === null) return;
  const order = scores.map((s, i) => [s, i]).sort((a, b) => b[0] - a[0]).slice(0, 3);
  for (const [s, i] of order) {
    const el = spans.find((span) => +span.dataset.i === i), item = document.createElement("li");
    item.dir = "auto";
    item.textContent = `${s.toFixed(3)}  ${el ? el.dataset.doc + " " + el.textContent : "span " + i}`;
    list.append(item);
  }
}
for (const el of units) {
  el.addEventListener("mouseenter", () => show(+el.dataset.u));
  el.addEventListener("mouseleave", () => show(pinned));
  el.addEventListener("click", () => { pinned = pinned === +el.dataset.u ? null : +el.dataset.u; show(pinned); });
}
"""


def _pieces(spans: Sequence[tuple[int, TextSpan]], start: int, end: int) -> list[_Piece]:
    """Cut ``[start, end)`` into the ``(index, span)`` spans, in text order, and the gaps between them.

    Spans are clipped to the range and to the end of the previous span, so touching or overlapping
    spans still give each character exactly once.
    """
    pieces: list[_Piece] = []
    cursor = start
    for index, span in sorted(spans, key=lambda item: (item[1].start, item[1].end)):
        low, high = max(span.start, cursor), min(span.end, end)
        if low >= high:
            continue
        if low > cursor:
            pieces.append((cursor, low, None))
        pieces.append((low, high, index))
        cursor = high
    if cursor < end:
        pieces.append((cursor, end, None))
    return pieces


def _chunk_pieces(result: RCAttributionResult, source: int) -> list[_Piece]:
    spans = [(i, span) for i, span in enumerate(result.context_spans) if span.source == source]
    return _pieces(spans, 0, len(result.chunks[source]))


def _document(result: RCAttributionResult, source: int) -> str:
    return f"Document [{source + 1}]" if len(result.chunks) > 1 else "Context"


def _intensity(scores: torch.Tensor) -> list[float]:
    """``[n_spans]`` shading intensities in [0, 1]: the square root of each span's share of the answer.

    Absolute, not relative to the best span, so a context that explains nothing stays pale; the square
    root keeps shares of a few percent visible (0.01 -> 0.1, 0.25 -> 0.5, 1 -> 1).
    """
    return scores.detach().float().cpu().clamp(0, 1).sqrt().tolist()


def _answer_html(result: RCAttributionResult) -> str:
    answer = result.answer
    g = None if result.groundedness is None else result.groundedness.detach().float().cpu().tolist()
    if g is not None and len(g) != len(result.answer_tokens):
        raise ValueError(
            f"groundedness has {len(g)} values but the result has {len(result.answer_tokens)} answer tokens"
        )
    support = None if result.token_support is None else result.token_support.tolist()
    unsupported = set(result.unsupported_tokens())
    tokens = list(enumerate(result.answer_tokens))
    parts = []
    for start, end, unit in _pieces(list(enumerate(result.output_spans)), 0, len(answer)):
        inner = []
        for low, high, token in _pieces(tokens, start, end):
            text = html.escape(answer[low:high])
            if token is None or g is None:
                inner.append(text)
                continue
            low_class = " low" if token in unsupported else ""
            title = f"groundedness {g[token]:.3f}"
            if support is not None:
                title += f", support {support[token]:.3f}"
            inner.append(
                f'<span class="g{low_class}" style="--u:{1 - g[token]:.3f}" title="{title}">{text}</span>'
            )
        body = "".join(inner)
        parts.append(body if unit is None else f'<span class="u" data-u="{unit}">{body}</span>')
    return "".join(parts)


def _chunk_html(result: RCAttributionResult, source: int, intensity: list[float], open_: bool) -> str:
    chunk, doc = result.chunks[source], html.escape(_document(result, source))
    parts = []
    for start, end, index in _chunk_pieces(result, source):
        text = html.escape(chunk[start:end])
        if index is None:
            parts.append(text)
            continue
        score = float(result.seq_attr[index])
        parts.append(
            f'<span class="s" data-i="{index}" data-doc="{doc}" title="score {score:.3f}" '
            f'style="background:rgba(255,140,0,{0.85 * intensity[index]:.3f})">{text}</span>'
        )
    body = f'<div class="text" dir="auto" data-chunk="{source}">{"".join(parts)}</div>'
    if len(result.chunks) == 1:
        return f'<div class="chunk">{body}</div>'
    share = sum(
        float(result.seq_attr[i]) for i, span in enumerate(result.context_spans) if span.source == source
    )
    summary = f'<summary><h3>{doc}</h3> <span class="share">{share:.1%} of the answer</span></summary>'
    return f'<details class="chunk"{" open" if open_ else ""}>{summary}{body}</details>'


def _open_documents(result: RCAttributionResult) -> set[int]:
    """The documents the page shows open: all of them, or the :data:`_OPEN_DOCUMENTS` highest-scoring."""
    if len(result.chunks) <= _OPEN_DOCUMENTS:
        return set(range(len(result.chunks)))
    shares = torch.zeros(len(result.chunks))
    for index, span in enumerate(result.context_spans):
        shares[span.source] += float(result.seq_attr[index])
    return set(torch.argsort(shares, descending=True, stable=True)[:_OPEN_DOCUMENTS].tolist())


def _summary_html(result: RCAttributionResult) -> str:
    rows = "".join(
        f"<tr><td>{rank}</td><td>{score:.3f}</td><td>{html.escape(_document(result, span.source))}</td>"
        f'<td dir="auto">{html.escape(one_line(span.text, 200))}</td></tr>'
        for rank, (span, score) in enumerate(result.top(5), start=1)
    )
    table = f"<h2>Top sources</h2><table><tr><th>#</th><th>score</th><th>source</th><th>text</th></tr>{rows}</table>"
    selection = result.head_selection
    if selection is None:
        return f"{table}<p>Method: <code>{html.escape(result.span_scorer)}</code></p>"
    heads = ", ".join(f"L{layer}H{head}" for layer, head in selection.as_pairs())
    return f"{table}<h2>Heads</h2><p>{html.escape(selection.describe())}: <code>{heads}</code></p>"


def result_table_html(result: RCAttributionResult, top: int = 3) -> str:
    """A compact HTML table of ``result`` for notebooks (``_repr_html_``): the answer, then each output
    unit with its ``top`` sources, their scores and documents. All text is escaped."""
    several = len(result.chunks) > 1
    rows = []
    for unit, span in enumerate(result.output_spans):
        sources = result.top(top, output=unit)
        for rank, (source, score) in enumerate(sources):
            lead = (
                f'<td rowspan="{len(sources)}" dir="auto">{html.escape(one_line(span.text, 120))}</td>'
                if rank == 0
                else ""
            )
            where = f"[{source.source + 1}] " if several else ""
            rows.append(
                f"<tr>{lead}<td>{score:.1%}</td>"
                f'<td dir="auto">{html.escape(where + one_line(source.text, 160))}</td></tr>'
            )
    style = "border-collapse:collapse;text-align:left;vertical-align:top"
    return (
        f'<div><p dir="auto"><b>Answer</b> ({html.escape(result.span_scorer)}): {html.escape(result.answer)}</p>'
        f'<table style="{style}"><tr><th>output</th><th>score</th><th>source</th></tr>{"".join(rows)}</table></div>'
    )


def to_html(result: RCAttributionResult, *, title: str | None = None) -> str:
    """A standalone HTML page (no external resources) showing ``result``.

    Hovering an answer unit shades the context by that unit's scores and lists its top 3 sources;
    clicking pins it. Answer tokens are underlined in red the less the context supports them.

    Parameters
    ----------
    result : RCAttributionResult
    title : str, optional
        Page title. Default: ``"Context attribution (<span scorer>)"``.

    Returns
    -------
    str
        The page; all text is HTML-escaped and the scores are embedded as JSON
        (``{"seq": [n_spans], "units": [n_outputs, n_spans]}``).
    """
    title = html.escape(title or f"Context attribution ({result.span_scorer})")
    intensity = _intensity(result.seq_attr)
    opened = _open_documents(result)
    assert result.token_attr is not None  # always set by RCAttributionResult.__init__
    payload = {
        "seq": result.seq_attr.double().round(decimals=6).tolist(),
        "units": result.token_attr.double().round(decimals=6).tolist(),
    }
    blob = json.dumps(payload).replace("</", "<\\/")
    chunks = "".join(
        _chunk_html(result, source, intensity, source in opened) for source in range(len(result.chunks))
    )
    collapsed = len(result.chunks) - len(opened)
    if collapsed:
        chunks = (
            f'<p class="legend">{len(result.chunks)} documents: the {len(opened)} that the answer draws on most '
            f"are open, the other {collapsed} folded (click a title to open it).</p>{chunks}"
        )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body><h1>{title}</h1>"
        f'<h2>Answer</h2><div class="text" dir="auto" id="answer">{_answer_html(result)}</div>'
        '<p class="legend">Hover an answer part to see its sources (click to pin). '
        '<span class="g" style="--u:1">Dotted red underline</span>: 1 - groundedness, how little the token '
        'draws on the context (fainter = more). <span class="g low" style="--u:0">Red background</span>: '
        f"unsupported, no context token matches it (token support below {SUPPORT_THRESHOLD:.2f}, the cut-off "
        "chosen on the unsupported-tokens benchmark).</p>"
        '<ol id="unit-sources"></ol>'
        f'<h2>Context <span id="showing">whole answer</span></h2>{chunks}{_summary_html(result)}'
        f'<script type="application/json" id="rc-data">{blob}</script><script>{_JS}</script>'
        "</body></html>\n"
    )


def save_html(result: RCAttributionResult, path: str | os.PathLike[str], **kw: Any) -> Path:
    """Write :func:`to_html` of ``result`` (keyword arguments passed on) to ``path``; returns the path."""
    path = Path(path)
    path.write_text(to_html(result, **kw), encoding="utf-8")
    return path


def _wrap(pieces: Sequence[tuple[str, str | None]], width: int) -> str:
    """Join ``(text, ansi_code)`` pieces into lines of at most ``width`` visible characters.

    Runs of one style are coloured per line, so that no escape code spans a line break.
    """
    lines: list[list[tuple[str, str | None]]] = [[]]
    column = 0
    for text, code in pieces:
        for word in re.findall(r"\n|[^\S\n]+|\S+", text):
            if word == "\n" or (column and column + len(word) > width):
                lines.append([])
                column = 0
                if word.isspace():  # the line break replaces it
                    continue
            lines[-1].append((word, code))
            column += len(word)
    return "\n".join(_styled(line) for line in lines)


def _styled(line: Sequence[tuple[str, str | None]]) -> str:
    """``(word, ansi_code)`` pairs as text, each run of one code wrapped in that code and a reset."""
    parts = []
    for code, run in groupby(line, key=itemgetter(1)):
        text = "".join(word for word, _ in run)
        parts.append(f"\x1b[{code}m{text}\x1b[0m" if code else text)
    return "".join(parts)


def _context_pieces(
    result: RCAttributionResult, scores: torch.Tensor, color: bool
) -> list[tuple[str, str | None]]:
    intensity = _intensity(scores)
    ranks = {
        int(i): rank for rank, i in enumerate(torch.argsort(scores, descending=True, stable=True)[:3], 1)
    }
    pieces: list[tuple[str, str | None]] = []
    for source, chunk in enumerate(result.chunks):
        if len(result.chunks) > 1:
            heading = ("\n\n" if source else "") + f"{_document(result, source)}\n"
            pieces.append((heading, "1" if color else None))
        for start, end, index in _chunk_pieces(result, source):
            text = chunk[start:end]
            if index is None:
                pieces.append((text, None))
            elif color:
                shade = _ANSI_RAMP[min(int(intensity[index] * len(_ANSI_RAMP)), len(_ANSI_RAMP) - 1)]
                pieces.append((text, f"38;5;16;48;5;{shade}" if intensity[index] >= _MIN_SHADE else None))
            elif index in ranks:
                rank = ranks[index]
                pieces.append((f"[{rank}:{float(scores[index]):.2f}]{text}[/{rank}]", None))
            else:
                pieces.append((text, None))
    return pieces


def shade_context(
    result: RCAttributionResult,
    *,
    output: int | None = None,
    color: bool | None = None,
    width: int | None = None,
) -> str:
    """The context with its spans highlighted by score (the first part of :func:`to_terminal`)."""
    if color is None:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    width = width or shutil.get_terminal_size().columns
    scores = result.scores(output)  # validates ``output``
    showing = "whole answer" if output is None else f"output {output % len(result.output_spans) + 1}"
    return f"Context (scores: {showing}):\n" + _wrap(_context_pieces(result, scores, color), width)


def to_terminal(
    result: RCAttributionResult,
    *,
    output: int | None = None,
    color: bool | None = None,
    width: int | None = None,
) -> str:
    """The context with its spans highlighted by score, then the top 3 sources of each output unit.

    Parameters
    ----------
    result : RCAttributionResult
    output : int, optional
        Highlight the scores of this output unit. Default: the whole answer.
    color : bool, optional
        Shade spans with ANSI 256-colour backgrounds; without colour, the top 3 spans are marked
        ``[rank:score]text[/rank]`` instead. Default: on when stdout is a terminal and ``NO_COLOR``
        is not set.
    width : int, optional
        Line width to wrap the context to. Default: the terminal's width.

    Returns
    -------
    str
    """
    width = width or shutil.get_terminal_size().columns
    lines = [shade_context(result, output=output, color=color, width=width), ""]
    for unit, span in enumerate(result.output_spans):
        lines.append(f"Output {unit + 1}: {one_line(span.text, width - 10)}")
        for rank, (source, score) in enumerate(result.top(3, unit), start=1):
            lead = f"  {rank}. {score:.3f}  {_document(result, source.source)}: "
            lines.append(lead + one_line(source.text, width - len(lead)))
    return "\n".join(lines)


def _head_scores(
    scores_or_result: RCAttributionResult | torch.Tensor | np.ndarray, selected: HeadsLike | None
) -> tuple[np.ndarray, np.ndarray, str]:
    """``[L, H]`` scores, ``[k, 2]`` selected heads and the score's name, checked."""
    kind = "head score"
    if isinstance(scores_or_result, RCAttributionResult):
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
    scores_or_result: RCAttributionResult | torch.Tensor | np.ndarray,
    *,
    selected: HeadsLike | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    label: str | None = None,
) -> Axes:
    """Heat map of every head's score (x = head, y = layer), the selected heads outlined (paper Fig. 4).

    Parameters
    ----------
    scores_or_result : RCAttributionResult or Tensor or ndarray, shape [L, H]
        A result (its ``head_selection`` is drawn) or a table of head scores.
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
    result: RCAttributionResult,
    *,
    threshold: float = SUPPORT_THRESHOLD,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Bars of each answer token's ``1 - token_support`` (log scale: the share of the answer's self logits
    above the token's best context logit), the cut-off drawn, the tokens flagged unsupported in red.

    Returns
    -------
    matplotlib Axes
    """
    if result.token_support is None:
        raise ValueError("this result has no token_support (baselines have none): explain with RCAttributor")
    gap = (1 - result.token_support.double()).clamp_min(1e-4).tolist()
    flagged = set(result.unsupported_tokens(threshold))
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.figure(figsize=(max(6.0, 0.28 * len(gap)), 3.2)).subplots()
    colours = ["#dc2626" if index in flagged else "#9ca3af" for index in range(len(gap))]
    ax.bar(range(len(gap)), gap, color=colours)
    ax.axhline(1 - threshold, color="#dc2626", linestyle="--", linewidth=1, label=f"cut-off {threshold:.2f}")
    ax.set_yscale("log")
    ax.set_xticks(range(len(gap)), [token.text.strip() or "␣" for token in result.answer_tokens], rotation=90)
    ax.set_xlim(-0.6, len(gap) - 0.4)
    ax.set_ylabel("1 - token support")
    ax.legend(loc="upper left", frameon=False)
    if title:
        ax.set_title(title)
    return ax


def save_head_heatmap(
    scores_or_result: RCAttributionResult | torch.Tensor | np.ndarray,
    path: str | os.PathLike[str],
    **kw: Any,
) -> Path:
    """Write :func:`plot_head_scores` (keyword arguments passed on) to ``path``, in the image format its
    extension names (``.png``, ``.jpg``, ``.svg``, ``.pdf``, ...); returns the path.

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
