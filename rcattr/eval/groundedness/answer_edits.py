"""Seeded edits of quoted content: gold answers with facts the sources do not support.

The *unsupported tokens* benchmark needs answers in which some tokens are known not to come
from the context. [`edit_answers`][rcattr.eval.groundedness.answer_edits.edit_answers] takes attribution records (QuoteSum, Veri-Gran), finds the
numbers, dates and named entities inside their gold spans (the text the annotators attributed to a
source, i.e. the quoted content), and swaps up to `max_edits` of them per record for values that appear
nowhere in the record's sources:

- `date`: a year (1000-2099) is shifted by 3 to 60 years; a month name becomes another month;
- `number`: each digit is redrawn (same length and separators, a different leading digit);
- `entity`: a run of capitalised words not at a sentence start becomes an entity of the same word count
  drawn from the other records' gold spans.

Every edit is recorded ([`Edit`][rcattr.eval.groundedness.answer_edits.Edit]: kind, character offsets in the edited answer, original and
replacement text), so the edited tokens are known exactly and the original answer can be rebuilt. Draws
are seeded per record (the record's id and the seed), so a record's edits do not depend on which other
records are loaded.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from rcattr.eval.common.datasets import BenchmarkRecord

EDIT_KINDS = ("number", "date", "entity")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_YEAR = re.compile(r"(?<![\w.,])(1\d{3}|20\d{2})(?![\w]|[.,]\d)")
_NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*(?!\w)")
_MONTH = re.compile(r"\b(?:" + "|".join(MONTHS) + r")\b")
_ENTITY = re.compile(r"\b[A-Z][a-zA-Z'\-]+(?: [A-Z][a-zA-Z'\-]+)*\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)[\"'*(\[]*$")
_ATTEMPTS = 50


@dataclass(frozen=True)
class Edit:
    """One swapped value: `answer[start:end] == replacement` in the edited answer."""

    kind: str  # one of EDIT_KINDS
    start: int
    end: int
    original: str
    replacement: str


@dataclass(frozen=True)
class EditedAnswer:
    """A record whose answer had quoted values swapped for unsupported ones."""

    record: BenchmarkRecord
    answer: str
    edits: list[Edit]

    def original_answer(self) -> str:
        """The record's answer, rebuilt by undoing the edits."""
        text = self.answer
        for edit in sorted(self.edits, key=lambda e: e.start, reverse=True):
            text = text[: edit.start] + edit.original + text[edit.end :]
        return text


@dataclass(frozen=True)
class _Candidate:
    kind: str
    start: int
    end: int
    text: str


def candidates(record: BenchmarkRecord) -> list[_Candidate]:
    """The numbers, dates and named entities inside the record's gold spans, not overlapping each other
    (a date wins over a number, either over an entity)."""
    found: list[_Candidate] = []

    def add(kind: str, start: int, end: int) -> None:
        if not any(start < c.end and c.start < end for c in found):
            found.append(_Candidate(kind, start, end, record.answer[start:end]))

    for span in record.gold:
        text = record.answer[span.start : span.end]
        for pattern, kind in ((_YEAR, "date"), (_MONTH, "date"), (_NUMBER, "number")):
            for match in pattern.finditer(text):
                add(kind, span.start + match.start(), span.start + match.end())
        for match in _ENTITY.finditer(text):
            start = span.start + match.start()
            if _SENTENCE_START.search(record.answer[:start]) or match.group() in MONTHS:
                continue
            add("entity", start, span.start + match.end())
    return sorted(found, key=lambda c: c.start)


def _absent(value: str, record: BenchmarkRecord) -> bool:
    lowered = value.lower()
    return (
        all(lowered not in chunk.lower() for chunk in record.chunks) and lowered not in record.answer.lower()
    )


def _redraw_digits(text: str, rng: random.Random) -> str:
    digits = [i for i, ch in enumerate(text) if ch.isdigit()]
    chars = list(text)
    for i in digits:
        chars[i] = str(rng.randrange(10))
    lead = digits[0]
    choices = [d for d in ("123456789" if len(digits) > 1 else "0123456789") if d != text[lead]]
    chars[lead] = rng.choice(choices)
    return "".join(chars)


def _replacement(
    candidate: _Candidate, record: BenchmarkRecord, entities: dict[int, list[str]], rng: random.Random
) -> str | None:
    """A value of the candidate's kind absent from the record's sources and answer (None if none found)."""
    for _ in range(_ATTEMPTS):
        if candidate.kind == "date" and candidate.text in MONTHS:
            value = rng.choice([m for m in MONTHS if m != candidate.text])
        elif candidate.kind == "date":
            value = str(int(candidate.text) + rng.choice([-1, 1]) * rng.randint(3, 60))
        elif candidate.kind == "number":
            value = _redraw_digits(candidate.text, rng)
        else:
            pool = entities.get(len(candidate.text.split()), [])
            if not pool:
                return None
            value = rng.choice(pool)
        if value != candidate.text and _absent(value, record):
            return value
    return None


def entity_pool(records: Sequence[BenchmarkRecord]) -> dict[int, list[str]]:
    """Every entity candidate of the records' gold spans, by word count (sorted, duplicates removed)."""
    pool: dict[int, set[str]] = {}
    for record in records:
        for candidate in candidates(record):
            if candidate.kind == "entity":
                pool.setdefault(len(candidate.text.split()), set()).add(candidate.text)
    return {words: sorted(values) for words, values in pool.items()}


def edit_record(
    record: BenchmarkRecord, entities: dict[int, list[str]], rng: random.Random, max_edits: int = 2
) -> EditedAnswer | None:
    """Swap up to `max_edits` of the record's candidates (drawn with `rng`) for absent values; None when
    no candidate could be swapped."""
    pool = candidates(record)
    rng.shuffle(pool)
    chosen: list[tuple[_Candidate, str]] = []
    for candidate in pool:
        if len(chosen) == max_edits:
            break
        value = _replacement(candidate, record, entities, rng)
        if value is not None:
            chosen.append((candidate, value))
    if not chosen:
        return None
    pieces: list[str] = []
    edits: list[Edit] = []
    cursor = 0
    for candidate, value in sorted(chosen, key=lambda pair: pair[0].start):
        pieces.append(record.answer[cursor : candidate.start])
        start = sum(map(len, pieces))
        pieces.append(value)
        edits.append(Edit(candidate.kind, start, start + len(value), candidate.text, value))
        cursor = candidate.end
    pieces.append(record.answer[cursor:])
    return EditedAnswer(record, "".join(pieces), edits)


def edit_answers(records: Sequence[BenchmarkRecord], seed: int = 0, max_edits: int = 2) -> list[EditedAnswer]:
    """The records that have a swappable value, each with up to `max_edits` seeded edits; entity
    replacements come from the other records' entities (never the record's own sources)."""
    entities = entity_pool(records)
    edited = (edit_record(r, entities, random.Random(f"{seed}:{r.id}"), max_edits) for r in records)
    return [e for e in edited if e is not None]
