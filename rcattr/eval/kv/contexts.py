"""The contexts of the compress-once protocol (`python -m rcattr.eval.kv --protocol once`): each a context
compressed once, without any question, and the questions then asked of a copy of its cache.

* **SQuAD v2**: consecutive paragraphs of one article joined (by blank lines) while they fit in `tokens`,
  and the answerable questions of every joined paragraph (at most `questions`, spread over the context).
* **needle**: [`place_needles`][rcattr.eval.kv.needle.place_needles], `needles` RULER key-value needles at depths
  spread over a haystack of `tokens`, one question per needle.
* **QMSum**: one meeting's specific queries whose gold turns fit in `tokens` together, with the
  [`meeting_excerpt`][rcattr.eval.kv.data.meeting_excerpt] around all of their gold turns.

Every context is measured in the model's tokens (`count_tokens`); `limit` caps the number of contexts.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rcattr.eval.common.datasets import data_dir
from rcattr.eval.kv.data import KVRecord, meeting_excerpt, squad_articles, turn_ranges
from rcattr.eval.kv.needle import _ADJECTIVES, _NOUNS, NEEDLE, QUESTION, haystack_sentences, place_needles

__all__ = ["KVContext", "load_contexts", "qmsum_contexts", "needle_contexts", "squad_contexts"]

# questions per context (needles per needle context)
DEFAULT_QUESTIONS = {"squad": 3, "qmsum": 3, "needle": 3}


@dataclass(frozen=True)
class KVContext:
    """A context compressed once, and the questions asked of it (each a [`KVRecord`][rcattr.eval.kv.data.KVRecord]
    whose `context` is this one's)."""

    id: str
    context: str
    questions: tuple[KVRecord, ...]


def spread(items: Sequence[KVRecord], count: int | None) -> list[KVRecord]:
    """`count` of `items` evenly spaced from the first to the last (all of them when `count` is None)."""
    if count is None or len(items) <= count:
        return list(items)
    if count == 1:
        return [items[0]]
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]


def squad_contexts(
    count_tokens: Callable[[str], int], tokens: int, limit: int | None = None, questions: int | None = 3
) -> list[KVContext]:
    """SQuAD v2 dev articles cut into contexts of consecutive paragraphs, each up to `tokens` tokens."""
    contexts: list[KVContext] = []
    for a, article in enumerate(squad_articles()):
        paragraphs = article["paragraphs"]
        first = 0
        while first < len(paragraphs) and (limit is None or len(contexts) < limit):
            texts: list[str] = []
            used, last = 0, first
            while last < len(paragraphs):
                cost = count_tokens(paragraphs[last]["context"]) + 2
                if texts and used + cost > tokens:
                    break
                texts.append(paragraphs[last]["context"])
                used += cost
                last += 1
            context = "\n\n".join(texts)
            asked = [
                KVRecord(
                    qa["id"],
                    context,
                    qa["question"],
                    tuple(dict.fromkeys(x["text"].strip() for x in qa["answers"])),
                )
                for paragraph in paragraphs[first:last]
                for qa in paragraph["qas"]
                if not qa["is_impossible"]
            ]
            if asked and used <= tokens:
                contexts.append(KVContext(f"squad-{a}-{first}", context, tuple(spread(asked, questions))))
            first = last
        if limit is not None and len(contexts) >= limit:
            break
    return contexts


def needle_contexts(
    count_tokens: Callable[[str], int], tokens: int, limit: int | None = None, needles: int = 3, seed: int = 0
) -> list[KVContext]:
    """`limit` (default 10) haystacks of `tokens` tokens with `needles` needles each, at depths spread
    over (0.1, 0.9), keys and values and the haystack's first sentence drawn from `random.Random(seed)`."""
    sentences = haystack_sentences()
    draw = random.Random(seed)
    depths = [0.5] if needles == 1 else [0.1 + 0.8 * i / (needles - 1) for i in range(needles)]
    contexts = []
    for c in range(10 if limit is None else limit):
        keys: list[str] = []
        while len(keys) < needles:  # distinct keys: each question has one answer
            key = f"{draw.choice(_ADJECTIVES)}-{draw.choice(_NOUNS)}"
            if key not in keys:
                keys.append(key)
        values = [str(draw.randrange(1_000_000, 10_000_000)) for _ in keys]
        start = draw.randrange(len(sentences))
        haystack = (sentences[(start + j) % len(sentences)] for j in range(len(sentences)))
        placed = [(NEEDLE.format(key=k, value=v), d) for k, v, d in zip(keys, values, depths, strict=True)]
        context = place_needles(haystack, placed, count_tokens, tokens)
        contexts.append(
            KVContext(
                f"needle-{tokens}-{c}",
                context,
                tuple(
                    KVRecord(f"needle-{tokens}-{c}-{depth:g}", context, QUESTION.format(key=k), (v,))
                    for k, v, depth in zip(keys, values, depths, strict=True)
                ),
            )
        )
    return contexts


def qmsum_contexts(
    count_tokens: Callable[[str], int], tokens: int, limit: int | None = None, questions: int | None = 3
) -> list[KVContext]:
    """One context per QMSum validation meeting: its first specific queries whose gold turns fit in `tokens`
    together (at most `questions`), and the meeting excerpt of `tokens` around all of them."""
    with open(data_dir() / "qmsum" / "val.jsonl") as lines:
        meetings = [json.loads(line) for line in lines if line.strip()]
    contexts: list[KVContext] = []
    for m, meeting in enumerate(meetings):
        if limit is not None and len(contexts) >= limit:
            break
        turns = [f"{turn['speaker']}: {turn['content']}" for turn in meeting["meeting_transcripts"]]
        cost = [count_tokens(turn) + 1 for turn in turns]
        chosen: list[tuple[int, dict[str, Any]]] = []
        gold: set[int] = set()
        used = 0
        for q, query in enumerate(meeting["specific_query_list"]):
            spans = turn_ranges(query["relevant_text_span"])
            mine = {t for start, end in spans for t in range(start, end + 1) if 0 <= t < len(turns)} - gold
            extra = sum(cost[t] for t in mine)
            if not mine and not gold or used + extra > tokens:
                continue
            chosen.append((q, query))
            gold |= mine
            used += extra
            if questions is not None and len(chosen) == questions:
                break
        if not chosen:
            continue
        spans = [(t, t) for t in sorted(gold)]
        context = meeting_excerpt(turns, spans, count_tokens, tokens)
        contexts.append(
            KVContext(
                f"qmsum-val-{m}",
                context,
                tuple(
                    KVRecord(f"qmsum-val-{m}-{q}", context, query["query"], (query["answer"].strip(),))
                    for q, query in chosen
                ),
            )
        )
    return contexts


def load_contexts(
    dataset: str, count_tokens: Callable[[str], int], tokens: int, limit: int | None, questions: int | None
) -> list[KVContext]:
    """The compress-once contexts of `dataset` ("squad", "needle" or "qmsum"); `questions` per context
    (default [`DEFAULT_QUESTIONS`][rcattr.eval.kv.contexts.DEFAULT_QUESTIONS]; the needles of a needle context)."""
    count = DEFAULT_QUESTIONS[dataset] if questions is None else questions
    if dataset == "squad":
        return squad_contexts(count_tokens, tokens, limit, count)
    if dataset == "needle":
        return needle_contexts(count_tokens, tokens, limit, count)
    if dataset == "qmsum":
        return qmsum_contexts(count_tokens, tokens, limit, count)
    raise ValueError(f"unknown dataset {dataset!r}")
