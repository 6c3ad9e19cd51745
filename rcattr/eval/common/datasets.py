"""Loaders for the two attribution benchmarks shipped in the checkout's `data/` (QuoteSum and Veri-Gran).

Both files mark attributed spans inline in the answer text (the `summary` field):

* **QuoteSum** (`quotesum/<split>.jsonl`): `[ i span ]`, `i` the 1-based slot of `source1..8`
  (`title1..8` alongside; unused slots are `""`). The markup is space-delimited, so a marker followed by
  punctuation is written `[ 2 Denitrification ] .`; outside markers punctuation is tight.
* **Veri-Gran** (`veri_gran/<split>.jsonl`): `[ n text ]` attributes `text` to `passages[n-1]`. The
  marker is `[ n ` plus the original text, so the original space before a word shows up as a double space
  (`filmed[ 24  at Oheka Castle ]`) and markers may cut words (`gut ]ters`, `U.S[ 62 . tax ]`). Each
  record is one statement of a longer answer: `chunk` is the statement (a sentence of the stripped
  summary), not the whole stripped summary, and only its spans are marked (two records have no marker and
  load with empty gold). Spans may start with punctuation (`, allowed for ...`): kept as annotated.

[`strip_markers`][rcattr.eval.common.datasets.strip_markers] turns either markup into a plain answer plus [`GoldSpan`][rcattr.eval.common.datasets.GoldSpan] offsets; the loaders
return [`BenchmarkRecord`][rcattr.eval.common.datasets.BenchmarkRecord] lists, and [`as_hf_dataset`][rcattr.eval.common.datasets.as_hf_dataset] turns them into a `datasets.Dataset`.
Spans citing a source the record does not have are dropped with a [`SkippedSpanWarning`][rcattr.eval.common.datasets.SkippedSpanWarning] (the shipped
files have none).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rcattr.moved import renamed_name

if TYPE_CHECKING:
    import datasets

_FOLDERS = {"quotesum": "quotesum", "verigran": "veri_gran"}
_QUOTESUM_SLOTS = 8
# `[` optional spaces, the 1-based index, one separating whitespace, the span, one optional space, `]`.
_MARKER = re.compile(r"\[\s*(\d+)\s([^\[\]]*?)\s?\]")
_PUNCT_AFTER = re.compile(r"^\s+(?=[.,;:!?)])")  # space between a marker and punctuation
_WORD = re.compile(r"\w")


class SkippedSpanWarning(UserWarning):
    """A marked span was dropped because it cites no existing source or is empty."""


@dataclass(frozen=True)
class GoldSpan:
    """One attributed span of the stripped answer."""

    start: int  # char offset in the stripped answer
    end: int
    text: str  # == answer[start:end]
    source: int  # 0-based index into the record's chunks


@dataclass(frozen=True)
class BenchmarkRecord:
    """A question, its context chunks, the answer with markers stripped, and the gold attributions."""

    id: str
    question: str
    chunks: list[str]  # context chunks, in source order (0-based)
    answer: str  # summary with markers stripped, whitespace normalised (single spaces, stripped ends)
    gold: list[GoldSpan]
    titles: list[str] | None = None  # QuoteSum titles, aligned with chunks


DATA_FILES = ("quotesum/dev.jsonl", "veri_gran/dev.jsonl", "squad_v2/dev-v2.0.json", "qmsum/val.jsonl")
DATA_HELP = (
    "Benchmark data: the folder $RCATTR_DATA, else data/ of the source checkout; it holds "
    + ", ".join(DATA_FILES)
    + ". The files are not part of the installed package."
)


def data_dir() -> Path:
    """The benchmark data folder: `$RCATTR_DATA`, else `data/` of the source checkout (shipped with it)."""
    env = os.environ.get("RCATTR_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[3] / "data"
    if not path.is_dir():
        where = "RCATTR_DATA points at" if env else "no RCATTR_DATA is set and the source checkout's"
        raise FileNotFoundError(
            f"benchmark data folder not found ({where} {path}); the benchmark files are not part of the "
            f"installed package: set RCATTR_DATA to a folder holding {', '.join(DATA_FILES)}"
        )
    return path


def _normalise(raw: str) -> tuple[str, list[int]]:
    """Collapse whitespace runs to one space and strip the ends; map each non-space raw char to its offset."""
    out: list[str] = []
    pos = [-1] * len(raw)
    pending = False
    for i, ch in enumerate(raw):
        if ch.isspace():
            pending = bool(out)
            continue
        if pending:
            out.append(" ")
            pending = False
        pos[i] = len(out)
        out.append(ch)
    return "".join(out), pos


def _skip(reason: str) -> None:
    warnings.warn(f"span dropped: {reason}", SkippedSpanWarning, stacklevel=3)


def strip_markers(summary: str, n_sources: int | None = None) -> tuple[str, list[GoldSpan]]:
    """Strip `[ i span ]` markers from `summary`; return the normalised answer and its gold spans.

    Indices are 1-based in the markup and 0-based in the spans. A marker glued to a preceding word char
    whose span starts with a word char gets a space inserted (`is[ 2 a]` -> `is a`); whitespace between
    a marker and following punctuation is dropped (`[ 1 foo ] .` -> `foo.`); whitespace runs collapse.
    Spans citing index 0 or above `n_sources` (when given), or with no text, are dropped with a
    [`SkippedSpanWarning`][rcattr.eval.common.datasets.SkippedSpanWarning]; their text stays in the answer. A `[` or `]` that is not part of a
    well-formed marker (e.g. `[ 1, 2 span ]`) raises `ValueError`.
    """
    raw = ""
    spans: list[tuple[int, int, int]] = []  # raw start, raw end, 0-based source
    cursor = 0
    for m in [*_MARKER.finditer(summary), None]:
        plain = summary[cursor : m.start() if m else len(summary)]
        debris = re.search(r"[\[\]]", plain)
        if debris:
            at = cursor + debris.start()
            raise ValueError(f"malformed marker at {at}: {summary[max(0, at - 20) : at + 30]!r}")
        raw += _PUNCT_AFTER.sub("", plain) if cursor else plain
        if m is None:
            break
        inner = m.group(2)
        if raw and inner and _WORD.match(raw[-1]) and _WORD.match(inner[0]):
            raw += " "
        spans.append((len(raw), len(raw) + len(inner), int(m.group(1)) - 1))
        raw += inner
        cursor = m.end()

    answer, pos = _normalise(raw)
    gold = []
    for a, b, source in spans:
        kept = [pos[i] for i in range(a, b) if pos[i] >= 0]
        if not kept:
            _skip(f"empty marker citing source {source + 1}")
        elif source < 0 or (n_sources is not None and source >= n_sources):
            _skip(f"{answer[kept[0] : kept[-1] + 1]!r} cites source {source + 1} of {n_sources}")
        else:
            gold.append(GoldSpan(kept[0], kept[-1] + 1, answer[kept[0] : kept[-1] + 1], source))
    return answer, gold


def _read_jsonl(name: str, split: str, limit: int | None) -> Iterator[dict[str, Any]]:
    folder = data_dir() / _FOLDERS[name]
    path = folder / f"{split}.jsonl"
    if not path.is_file():
        available = sorted(p.name for p in folder.glob("*.jsonl")) if folder.is_dir() else []
        raise ValueError(f"no split {split!r} for {name}: {path} missing; available: {available or 'none'}")
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                return
            yield json.loads(line)


def load_quotesum(split: str = "dev", limit: int | None = None) -> list[BenchmarkRecord]:
    """QuoteSum records: chunks are the non-empty `source` slots (titles in `titles`), ids `unique_id`."""
    records = []
    for row in _read_jsonl("quotesum", split, limit):
        slots = [row[f"source{i}"] for i in range(1, _QUOTESUM_SLOTS + 1)]
        slot_to_chunk = {s: k for k, s in enumerate(s for s, text in enumerate(slots) if text)}
        answer, gold = strip_markers(row["summary"], n_sources=_QUOTESUM_SLOTS)
        for g in gold:
            if g.source not in slot_to_chunk:
                _skip(f"{g.text!r} cites empty source slot {g.source + 1} in {row['unique_id']}")
        records.append(
            BenchmarkRecord(
                id=row["unique_id"],
                question=row["question"],
                chunks=[slots[s] for s in slot_to_chunk],
                answer=answer,
                gold=[replace(g, source=slot_to_chunk[g.source]) for g in gold if g.source in slot_to_chunk],
                titles=[row[f"title{s + 1}"] for s in slot_to_chunk],
            )
        )
    return records


def load_verigran(split: str = "dev", limit: int | None = None) -> list[BenchmarkRecord]:
    """Veri-Gran records: chunks are `passages`; ids are `verigran-<split>-<line>` (the file has none)."""
    records = []
    for i, row in enumerate(_read_jsonl("verigran", split, limit)):
        answer, gold = strip_markers(row["summary"], n_sources=len(row["passages"]))
        records.append(
            BenchmarkRecord(
                id=f"verigran-{split}-{i:04d}",
                question=row["question"],
                chunks=list(row["passages"]),
                answer=answer,
                gold=gold,
            )
        )
    return records


def load_attribution(name: str, split: str = "dev", limit: int | None = None) -> list[BenchmarkRecord]:
    """Load `"quotesum"` or `"verigran"`."""
    loaders = {"quotesum": load_quotesum, "verigran": load_verigran}
    if name not in loaders:
        raise ValueError(f"unknown attribution benchmark {name!r}; choose one of {sorted(loaders)}")
    return loaders[name](split, limit)


def as_hf_dataset(records: list[BenchmarkRecord]) -> datasets.Dataset:
    """A `datasets.Dataset` with columns id, question, chunks, answer, gold (dicts), titles."""
    import datasets

    return datasets.Dataset.from_list([asdict(r) for r in records])


def load_attribution_dataset(name: str, split: str = "dev", limit: int | None = None) -> datasets.Dataset:
    """[`load_attribution`][rcattr.eval.common.datasets.load_attribution] as a `datasets.Dataset` (built locally, no hub access)."""
    return as_hf_dataset(load_attribution(name, split, limit))


def record_from_row(row: dict[str, Any]) -> BenchmarkRecord:
    """Inverse of [`as_hf_dataset`][rcattr.eval.common.datasets.as_hf_dataset] for one row."""
    return BenchmarkRecord(
        id=row["id"],
        question=row["question"],
        chunks=list(row["chunks"]),
        answer=row["answer"],
        gold=[GoldSpan(**g) for g in row["gold"]],
        titles=None if row.get("titles") is None else list(row["titles"]),
    )


def __getattr__(name: str) -> Any:
    """The names this module gave up, with a DeprecationWarning until rcattr 0.3.0 (`rcattr.moved.RENAMED_NAMES`)."""
    return renamed_name(__name__, name)
