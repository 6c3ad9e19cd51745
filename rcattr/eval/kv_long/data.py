"""The tasks of the long-generation benchmark: answers long enough for the cache to grow past its budget.

* **qmsum** (`qmsum/val.jsonl`): each meeting's *general* query ("What were the main discussion points of
  the meeting?"), answered at length after the meeting's opening turns (as many whole turns as fit a token
  budget); the gold answer summarises the whole meeting, so ROUGE-L is a loose quality check and the
  teacher-forced KL against the full cache the measure.
* **needle** ([`rcattr.eval.kv.needle`][rcattr.eval.kv.needle]'s prompts): the answer starts with a long prefix the model is
  teacher-forced through (other SQuAD prose, then "the special magic number for {key} ... is"), so
  the needle must survive every decode-time eviction of the prefix before the model states its value.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rcattr.eval.common.datasets import data_dir
from rcattr.eval.kv.data import KVRecord, meeting_excerpt
from rcattr.eval.kv.needle import QUESTION, haystack_sentences, load_needle

LONG_TASKS = ("qmsum", "needle")
PREFIX_OPENING = "Before answering, here is some background. "
PREFIX_CLOSING = " Now, the special magic number for {key} mentioned in the provided text is"


@dataclass(frozen=True)
class LongRecord:
    """A [`KVRecord`][rcattr.eval.kv.data.KVRecord] and the `prefix` every cache is teacher-forced through at
    the start of the answer ("" for none)."""

    record: KVRecord
    prefix: str = ""


def load_qmsum_general(
    count_tokens: Callable[[str], int], budget: int = 1024, limit: int | None = None
) -> list[LongRecord]:
    """Every QMSum validation meeting's general queries (the first `limit`), each after the meeting's first
    turns that fit `budget` tokens (`count_tokens` measures text in the model's tokens)."""
    with open(data_dir() / "qmsum" / "val.jsonl") as lines:
        meetings: list[dict[str, Any]] = [json.loads(line) for line in lines if line.strip()]
    records = []
    for m, meeting in enumerate(meetings):
        turns = [f"{turn['speaker']}: {turn['content']}" for turn in meeting["meeting_transcripts"]]
        context = meeting_excerpt(turns, [(0, len(turns) - 1)], count_tokens, budget)
        for q, query in enumerate(meeting["general_query_list"]):
            record = KVRecord(
                f"qmsum-val-{m}-general-{q}", context, query["query"], (query["answer"].strip(),)
            )
            records.append(LongRecord(record))
    return records[:limit]


def answer_prefix(key: str, count_tokens: Callable[[str], int], tokens: int, seed: int) -> str:
    """About `tokens` tokens of SQuAD sentences from a seeded offset, between [`PREFIX_OPENING`][rcattr.eval.kv_long.data.PREFIX_OPENING] and
    [`PREFIX_CLOSING`][rcattr.eval.kv_long.data.PREFIX_CLOSING] (which asks for `key`'s value)."""
    sentences = haystack_sentences()
    start, used, chosen = random.Random(seed).randrange(len(sentences)), 0, []
    for j in range(len(sentences)):
        sentence = sentences[(start + j) % len(sentences)]
        if used + count_tokens(sentence) > tokens:
            break
        chosen.append(sentence)
        used += count_tokens(sentence)
    return PREFIX_OPENING + " ".join(chosen) + PREFIX_CLOSING.format(key=key)


def load_needle_prefixed(
    count_tokens: Callable[[str], int],
    limit: int | None = None,
    prefix_tokens: int = 256,
    lengths: tuple[int, ...] = (1024, 2048),
) -> list[LongRecord]:
    """[`load_needle`][rcattr.eval.kv.needle.load_needle]'s prompts of `lengths` tokens (every depth), each with an
    [`answer_prefix`][rcattr.eval.kv_long.data.answer_prefix] of about `prefix_tokens` tokens drawn from its index."""
    records = load_needle(count_tokens, limit, lengths=lengths)
    return [
        LongRecord(record, answer_prefix(_key(record), count_tokens, prefix_tokens, seed=i))
        for i, record in enumerate(records)
    ]


def _key(record: KVRecord) -> str:
    """The key a needle prompt's question asks for."""
    match = re.fullmatch(re.escape(QUESTION).replace(re.escape("{key}"), "(.+)"), record.question)
    assert match is not None, record.question
    return match.group(1)
