"""Loaders for the KV-compression benchmark: SQuAD v2 (short contexts) and QMSum (meetings, truncated).

Each record is a context to compress, a question asked after it, and the gold answers:

* **SQuAD v2** (`squad_v2/dev-v2.0.json`): one record per answerable question (the 3,168 unanswerable
  ones have no gold text to score ROUGE against), in file order; the context is the question's paragraph.
* **QMSum** (`qmsum/val.jsonl`): one record per *specific* query, whose `relevant_text_span` says which
  turns hold the answer (general queries are about the whole ~9k-word meeting and cannot be truncated
  honestly). Queries are taken round-robin over meetings (every meeting's first query, then every
  meeting's second, ...), so a small `limit` still spans many meetings. The context is
  [`meeting_excerpt`][rcattr.eval.kv.data.meeting_excerpt]: the gold turns, then the turns around them, to a token budget.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from rcattr.eval.common.datasets import data_dir

KV_DATASETS = ("squad", "qmsum", "needle")  # the needle task: rcattr.eval.kv.needle


@dataclass(frozen=True)
class KVRecord:
    """A context to compress, the question that follows it, and the gold answers (ROUGE takes the best)."""

    id: str
    context: str
    question: str
    answers: tuple[str, ...]


def squad_articles() -> list[dict[str, Any]]:
    """The articles of SQuAD v2 dev, in file order, each with its `paragraphs`."""
    return json.loads((data_dir() / "squad_v2" / "dev-v2.0.json").read_text())["data"]


def squad_paragraphs() -> list[dict[str, Any]]:
    """Every paragraph of SQuAD v2 dev (`context` and its `qas`), in file order."""
    return [paragraph for article in squad_articles() for paragraph in article["paragraphs"]]


def load_squad(limit: int | None = None) -> list[KVRecord]:
    """The first `limit` answerable SQuAD v2 dev questions, each with its paragraph."""
    records = []
    for paragraph in squad_paragraphs():
        for qa in paragraph["qas"]:
            if qa["is_impossible"]:
                continue
            answers = tuple(dict.fromkeys(a["text"].strip() for a in qa["answers"]))
            records.append(KVRecord(qa["id"], paragraph["context"], qa["question"], answers))
            if len(records) == limit:
                return records
    return records


def turn_ranges(spans: Sequence[Sequence[str]]) -> list[tuple[int, int]]:
    """QMSum's inclusive `[["start", "end"], ...]` turn ranges as `(start, end)` ints."""
    return [(int(start), int(end)) for start, end in spans]


def meeting_excerpt(
    turns: Sequence[str], gold: Sequence[tuple[int, int]], count_tokens: Callable[[str], int], budget: int
) -> str:
    """The meeting text a model with `budget` tokens of context gets for one query.

    The gold turns come first in the budget (in meeting order; if they alone are too long, the first of
    them that fit), then the turns just before and after them, alternately, until the next turn would
    not fit. The chosen turns are joined in meeting order, one per line.
    """
    if budget <= 0:
        raise ValueError(f"the context budget must be positive, got {budget}")
    gold_turns = sorted({t for start, end in gold for t in range(start, end + 1) if 0 <= t < len(turns)})
    if not gold_turns:
        raise ValueError(f"no turn of the gold spans {list(gold)} is in a {len(turns)}-turn meeting")
    cost = [count_tokens(turn) + 1 for turn in turns]  # + the newline
    chosen: set[int] = set()
    used = 0
    for turn in gold_turns:
        if used + cost[turn] > budget:
            break
        chosen.add(turn)
        used += cost[turn]
    if not chosen:  # a single gold turn longer than the budget: keep its beginning
        return _cut_to_budget(turns[gold_turns[0]], count_tokens, budget - 1)
    before = range(min(chosen) - 1, -1, -1)
    after = range(max(chosen) + 1, len(turns))
    for turn in (t for pair in zip_longest(before, after) for t in pair if t is not None):
        if turn in chosen:
            continue
        if used + cost[turn] > budget:
            break
        chosen.add(turn)
        used += cost[turn]
    return "\n".join(turns[t] for t in sorted(chosen))


def _cut_to_budget(text: str, count_tokens: Callable[[str], int], budget: int) -> str:
    words = text.split()
    low, high = 0, len(words)
    while low < high:  # the longest word prefix within the budget
        middle = (low + high + 1) // 2
        if count_tokens(" ".join(words[:middle])) <= budget:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low])


def load_qmsum(
    count_tokens: Callable[[str], int], budget: int = 1024, limit: int | None = None
) -> list[KVRecord]:
    """The first `limit` specific QMSum validation queries (round-robin over meetings), each with the
    [`meeting_excerpt`][rcattr.eval.kv.data.meeting_excerpt] of `budget` tokens (`count_tokens` measures text in the model's tokens)."""
    with open(data_dir() / "qmsum" / "val.jsonl") as lines:
        meetings: list[dict[str, Any]] = [json.loads(line) for line in lines if line.strip()]
    queries = [  # (meeting, query index, query), every meeting's first query, then every second, ...
        (m, q, query)
        for q, row in enumerate(zip_longest(*(meeting["specific_query_list"] for meeting in meetings)))
        for m, query in enumerate(row)
        if query is not None
    ]
    records = []
    for m, q, query in queries[:limit]:
        turns = [f"{turn['speaker']}: {turn['content']}" for turn in meetings[m]["meeting_transcripts"]]
        context = meeting_excerpt(turns, turn_ranges(query["relevant_text_span"]), count_tokens, budget)
        records.append(KVRecord(f"qmsum-val-{m}-{q}", context, query["query"], (query["answer"].strip(),)))
    return records
