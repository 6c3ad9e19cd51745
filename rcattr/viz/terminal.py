"""A result in a terminal: the context shaded by span score with 256-colour backgrounds, then each output
unit's top sources."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter

import torch

from rcattr.record.record import AttributionRecord
from rcattr.text.segmentation import one_line
from rcattr.viz._pieces import chunk_pieces, document_names, shade_intensity

_ANSI_RAMP = (230, 229, 228, 227, 221, 215, 209, 203)  # 256-colour backgrounds, pale yellow to red

_MIN_SHADE = 0.1  # intensities below this (shares below 1%) stay unshaded in the terminal


def _wrap(pieces: Sequence[tuple[str, str | None]], width: int) -> str:
    """Join `(text, ansi_code)` pieces into lines of at most `width` visible characters.

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
    """`(word, ansi_code)` pairs as text, each run of one code wrapped in that code and a reset."""
    parts = []
    for code, run in groupby(line, key=itemgetter(1)):
        text = "".join(word for word, _ in run)
        parts.append(f"\x1b[{code}m{text}\x1b[0m" if code else text)
    return "".join(parts)


def _context_pieces(
    result: AttributionRecord, scores: torch.Tensor, color: bool
) -> list[tuple[str, str | None]]:
    intensity = shade_intensity(scores)
    ranks = {
        int(i): rank for rank, i in enumerate(torch.argsort(scores, descending=True, stable=True)[:3], 1)
    }
    pieces: list[tuple[str, str | None]] = []
    names = document_names(result)
    for source, chunk in enumerate(result.chunks):
        if len(result.chunks) > 1:
            heading = ("\n\n" if source else "") + f"{names[source]}\n"
            pieces.append((heading, "1" if color else None))
        for start, end, index in chunk_pieces(result, source):
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
    result: AttributionRecord,
    *,
    output: int | None = None,
    color: bool | None = None,
    width: int | None = None,
) -> str:
    """The context with its spans highlighted by score (the first part of [`to_terminal`][rcattr.viz.terminal.to_terminal])."""
    if color is None:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    width = width or shutil.get_terminal_size().columns
    scores = result.scores(output)  # validates `output`
    showing = "whole answer" if output is None else f"output {output % len(result.output_spans) + 1}"
    return f"Context (scores: {showing}):\n" + _wrap(_context_pieces(result, scores, color), width)


def to_terminal(
    result: AttributionRecord,
    *,
    output: int | None = None,
    color: bool | None = None,
    width: int | None = None,
) -> str:
    """The context with its spans highlighted by score, then the top 3 sources of each output unit.

    Parameters
    ----------
    result : AttributionRecord
    output : int, optional
        Highlight the scores of this output unit. Default: the whole answer.
    color : bool, optional
        Shade spans with ANSI 256-colour backgrounds; without colour, the top 3 spans are marked
        `[rank:score]text[/rank]` instead. Default: on when stdout is a terminal and `NO_COLOR`
        is not set.
    width : int, optional
        Line width to wrap the context to. Default: the terminal's width.

    Returns
    -------
    str
    """
    width = width or shutil.get_terminal_size().columns
    lines = [shade_context(result, output=output, color=color, width=width), ""]
    names = document_names(result)
    for unit, span in enumerate(result.output_spans):
        lines.append(f"Output {unit + 1}: {one_line(span.text, width - 10)}")
        for rank, (source, score) in enumerate(result.top(3, unit), start=1):
            lead = f"  {rank}. {score:.3f}  {names[source.source]}: "
            lines.append(lead + one_line(source.text, width - len(lead)))
    return "\n".join(lines)
