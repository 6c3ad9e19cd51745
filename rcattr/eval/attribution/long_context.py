"""Long-context attribution: each record's own sources hidden among distractor passages, to a fixed length.

A RAG prompt holds dozens of retrieved chunks, most of them beside the point. [`long_records`][rcattr.eval.attribution.long_context.long_records] turns the
benchmark's records into such prompts: each record's sources, kept together and in their order, go at the
`start`, `middle` or `end` of a list of distractor documents (the "lost in the middle" axis), and
distractors are added until the prompt with its answer reaches [`LongContext.tokens`][rcattr.eval.attribution.long_context.LongContext.tokens] tokens of the
model's tokenizer. The distractors are passages of the same file's other questions (never the record's own
question: Veri-Gran's statements of one answer, QuoteSum's summaries of one question share their sources)
taken in turn with SQuAD v2 paragraphs (other topics), in an order seeded by the run's seed and the record's
id, so a run is reproducible and every method sees the same prompts. The gold spans point at the record's
sources where they now are; the record keeps its id, so a long run pairs with the short run of the same file.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import chain, zip_longest

from rcattr.eval.attribution.lengths import load_records
from rcattr.eval.common.datasets import BenchmarkRecord
from rcattr.eval.kv.data import squad_paragraphs
from rcattr.protocols import TokenizerLike

POSITIONS = ("start", "middle", "end")
Passage = tuple[str, str]  # (the question it belongs to, its text)
Length = Callable[[BenchmarkRecord], int]  # a record's prompt and answer, in tokens


@dataclass(frozen=True)
class LongContext:
    """How far each record is stretched.

    Attributes
    ----------
    tokens : int
        The length of the prompt and its answer, in tokens, that distractors fill up to (never past).
    position : {"start", "middle", "end"}
        Where the record's own sources go among the distractors.
    seed : int
        The distractors' order (with each record's id).
    """

    tokens: int
    position: str = "middle"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {', '.join(POSITIONS)}, got {self.position!r}")
        if self.tokens < 1:
            raise ValueError(f"tokens must be positive, got {self.tokens}")


def distractor_passages(dataset: str, split: str) -> tuple[list[Passage], list[Passage]]:
    """The distractor pools: every distinct passage of the file's records, and every SQuAD v2 paragraph, each
    with the question it belongs to (a SQuAD paragraph: its own text)."""
    own = {
        (record.question, chunk): None
        for record in load_records(dataset, split)
        for chunk in record.chunks
        if chunk.strip()
    }
    squad = {(p["context"], p["context"]): None for p in squad_paragraphs()}
    return list(own), list(squad)


def distractors_for(record: BenchmarkRecord, pools: Sequence[Sequence[Passage]], seed: int) -> Iterator[str]:
    """The distractors of `record` in the order they are tried: each pool shuffled (by `seed` and the
    record's id) and taken in turn, leaving out the record's question and any passage it already holds."""
    rng = random.Random(f"{seed}:{record.id}")
    shuffled = [rng.sample(list(pool), len(pool)) for pool in pools]
    held = set(record.chunks)
    for passage in chain.from_iterable(zip_longest(*shuffled)):
        if passage is not None and passage[0] != record.question and passage[1] not in held:
            held.add(passage[1])
            yield passage[1]


def placed(record: BenchmarkRecord, distractors: Sequence[str], position: str) -> BenchmarkRecord:
    """`record` with its sources at `position` among `distractors`; the gold spans follow them."""
    before = {"start": 0, "middle": len(distractors) // 2, "end": len(distractors)}[position]
    return replace(
        record,
        chunks=[*distractors[:before], *record.chunks, *distractors[before:]],
        gold=[replace(span, source=span.source + before) for span in record.gold],
        titles=None,
    )


def stretched(
    record: BenchmarkRecord,
    context: LongContext,
    pools: Sequence[Sequence[Passage]],
    length: Length,
    passage_tokens: Callable[[str], int],
) -> BenchmarkRecord:
    """`record` among as many distractors as fit `context.tokens` (measured with `length`; each
    passage's share estimated with `passage_tokens` and checked on the whole prompt)."""
    room = context.tokens - length(record)
    if room < 0:
        raise ValueError(f"record {record.id} is longer than {context.tokens} tokens on its own")
    chosen: list[str] = []
    for passage in distractors_for(record, pools, context.seed):
        cost = passage_tokens(passage)
        if cost <= room:
            chosen.append(passage)
            room -= cost
            if room < 8:  # no passage is that short: the prompt is full
                break
    long = placed(record, chosen, context.position)
    while chosen and length(long) > context.tokens:  # the estimate was short: drop the last one added
        chosen.pop()
        long = placed(record, chosen, context.position)
    return long


def long_records(
    records: Sequence[BenchmarkRecord],
    context: LongContext,
    pools: Sequence[Sequence[Passage]],
    length: Length,
    passage_tokens: Callable[[str], int],
) -> list[BenchmarkRecord]:
    """The records that fit `context.tokens` on their own, stretched to it ([`stretched`][rcattr.eval.attribution.long_context.stretched])."""
    fitting = [record for record in records if length(record) <= context.tokens]
    return [stretched(r, context, pools, length, passage_tokens) for r in fitting]


def passage_tokens(tokenizer: TokenizerLike) -> Callable[[str], int]:
    """A passage's share of the prompt in `tokenizer`'s tokens: its `Document [i]:` line."""
    return lambda passage: len(
        tokenizer(f"Document [99]: {passage}\n", add_special_tokens=False)["input_ids"]
    )
