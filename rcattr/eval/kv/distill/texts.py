"""Plain prose to fit a score predictor on: consecutive paragraphs of SQuAD v2 articles, excerpts of QMSum
meetings and the sources of QuoteSum questions, each cut to a number of tokens, taken in turn from the three.

No needle is placed in them, so that the needle task tests what the predictor learned, and the SQuAD articles and
QMSum meetings are taken from the end of their files, where the KV benchmark's contexts (which take the first
ones) do not reach at the sizes it runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice, zip_longest

from rcattr.eval.common.datasets import data_dir
from rcattr.eval.kv.data import squad_articles

__all__ = ["FittingText", "fitting_texts"]


@dataclass(frozen=True)
class FittingText:
    """One fitting context: its id (its source and place there) and its text."""

    id: str
    text: str


def _fill(
    pieces: list[str], count_tokens: Callable[[str], int], tokens: int, separator: str
) -> tuple[str | None, int]:
    """The leading `pieces` joined while they fit in `tokens` tokens (None unless they fill 80% of it), and
    how many were taken."""
    taken: list[str] = []
    for piece in pieces:
        if count_tokens(separator.join([*taken, piece])) > tokens:
            break
        taken.append(piece)
    text = separator.join(taken)
    return (text if taken and count_tokens(text) >= 0.8 * tokens else None), len(taken)


def _runs(
    pieces: list[str], count_tokens: Callable[[str], int], tokens: int, name: str
) -> Iterator[FittingText]:
    """Consecutive `pieces` joined by blank lines into contexts of up to `tokens` tokens, `name-<first piece>`."""
    start = 0
    while start < len(pieces):
        text, taken = _fill(pieces[start:], count_tokens, tokens, "\n\n")
        if text is None:
            return
        yield FittingText(f"{name}-{start}", text)
        start += taken


def _squad(count_tokens: Callable[[str], int], tokens: int) -> Iterator[FittingText]:
    for a, article in reversed(list(enumerate(squad_articles()))):
        yield from _runs([p["context"] for p in article["paragraphs"]], count_tokens, tokens, f"squad-{a}")


def _qmsum(count_tokens: Callable[[str], int], tokens: int) -> Iterator[FittingText]:
    with open(data_dir() / "qmsum" / "val.jsonl") as lines:
        meetings = [json.loads(line) for line in lines if line.strip()]
    for m in reversed(range(len(meetings))):
        turns = [f"{turn['speaker']}: {turn['content']}" for turn in meetings[m]["meeting_transcripts"]]
        text, _ = _fill(turns, count_tokens, tokens, "\n")
        if text is not None:
            yield FittingText(f"qmsum-{m}", text)


def _quotesum(count_tokens: Callable[[str], int], tokens: int) -> Iterator[FittingText]:
    with open(data_dir() / "quotesum" / "dev.jsonl") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    sources: list[str] = []
    seen: set[str] = set()
    for record in records:
        for i in range(1, 9):
            source = record.get(f"source{i}", "")
            if source and source not in seen:
                seen.add(source)
                sources.append(f"{record.get(f'title{i}', '')}\n{source}".strip())
    yield from _runs(sources, count_tokens, tokens, "quotesum")


def fitting_texts(count_tokens: Callable[[str], int], tokens: int, count: int) -> list[FittingText]:
    """`count` contexts of up to `tokens` tokens (`count_tokens` measures text in the model's tokens), one
    from SQuAD, one from QMSum, one from QuoteSum in turn, while each has more."""
    sources = (_squad(count_tokens, tokens), _qmsum(count_tokens, tokens), _quotesum(count_tokens, tokens))
    turns = (text for row in zip_longest(*sources) for text in row if text is not None)
    return list(islice(turns, count))
