"""The answer-level groundedness tasks: each item is one question answered twice by the model, once over a
context that supports an answer and once over one that does not. Built from SQuAD v2 dev, without labels
written by hand:

- `relevance`: an answerable question over its own paragraph, and over a paragraph drawn (seeded) from
  another article;
- `unanswerable`: over one paragraph, an answerable question and an unanswerable one (`is_impossible`:
  written to look answerable from the paragraph, which does not hold the answer), the n-th of each kind of
  the paragraph paired;
- `removed`: an answerable question over its paragraph, and over the same paragraph with the sentence
  that holds the answer removed (kept only when no gold answer's text is left in the rest).

The second answer is the model's own error when it answers anyway: a natural error, not an edit.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rcattr.eval.kv import data as kv_data
from rcattr.text.segmentation import sentence_spans


@dataclass(frozen=True)
class Answering:
    """A question and the context it is asked over."""

    context: str
    question: str


@dataclass(frozen=True)
class ContextPair:
    """One item of a paired task: the `supported` condition (its context supports an answer) and the
    `unsupported` one."""

    id: str
    supported: Answering
    unsupported: Answering


@dataclass(frozen=True)
class PairedTask:
    """A paired task: its conditions' names as the rows store them (supported first) and its pairs."""

    name: str
    conditions: tuple[str, str]
    description: str
    build: Callable[[int | None, int], list[ContextPair]]

    def pairs(self, limit: int | None = None, seed: int = 0) -> list[ContextPair]:
        return self.build(limit, seed)


def _questions(articles: list[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any], dict[str, Any]]]:
    for index, article in enumerate(articles):
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield index, paragraph, qa


def relevance_pairs(limit: int | None = None, seed: int = 0) -> list[ContextPair]:
    """The first `limit` answerable SQuAD v2 dev questions, each over its own paragraph and over one drawn
    (seeded) from another article."""
    squad = kv_data.squad_articles()
    articles = [[paragraph["context"] for paragraph in article["paragraphs"]] for article in squad]
    rng = random.Random(seed)
    pairs: list[ContextPair] = []
    for index, paragraph, qa in _questions(squad):
        if qa["is_impossible"]:
            continue
        other_article = rng.choice([a for i, a in enumerate(articles) if i != index])
        own, other = paragraph["context"], rng.choice(other_article)
        pairs.append(ContextPair(qa["id"], Answering(own, qa["question"]), Answering(other, qa["question"])))
        if len(pairs) == limit:
            break
    return pairs


def unanswerable_pairs(limit: int | None = None, seed: int = 0) -> list[ContextPair]:
    """Per SQuAD v2 dev paragraph, its n-th answerable question paired with its n-th unanswerable one, over
    the paragraph; the first `limit` pairs (`seed` is unused: nothing is drawn)."""
    pairs: list[ContextPair] = []
    for article in kv_data.squad_articles():
        for paragraph in article["paragraphs"]:
            answerable = [qa for qa in paragraph["qas"] if not qa["is_impossible"]]
            impossible = [qa for qa in paragraph["qas"] if qa["is_impossible"]]
            context = paragraph["context"]
            for good, bad in zip(answerable, impossible, strict=False):
                pairs.append(
                    ContextPair(
                        f"{good['id']}|{bad['id']}",
                        Answering(context, good["question"]),
                        Answering(context, bad["question"]),
                    )
                )
                if len(pairs) == limit:
                    return pairs
    return pairs


def without_answer_sentence(context: str, qa: dict[str, Any]) -> str | None:
    """`context` with the sentence that holds the first gold answer removed, or None when no sentence
    holds it whole, the paragraph has one sentence, or a gold answer's text is still in what is left."""
    answer = qa["answers"][0]
    start, end = answer["answer_start"], answer["answer_start"] + len(answer["text"])
    sentences = sentence_spans(context)
    holding = [s for s in sentences if s.start <= start and end <= s.end]
    if len(sentences) < 2 or not holding:
        return None
    kept = " ".join(s.text for s in sentences if s is not holding[0])
    if any(gold["text"].strip().lower() in kept.lower() for gold in qa["answers"]):
        return None
    return kept


def removed_sentence_pairs(limit: int | None = None, seed: int = 0) -> list[ContextPair]:
    """The first `limit` answerable SQuAD v2 dev questions whose answer sentence can be removed
    ([`without_answer_sentence`][rcattr.eval.groundedness.pairs.without_answer_sentence]), over the full paragraph and over the rest (`seed` is unused)."""
    pairs: list[ContextPair] = []
    for _, paragraph, qa in _questions(kv_data.squad_articles()):
        if qa["is_impossible"]:
            continue
        rest = without_answer_sentence(paragraph["context"], qa)
        if rest is None:
            continue
        question = qa["question"]
        pairs.append(
            ContextPair(qa["id"], Answering(paragraph["context"], question), Answering(rest, question))
        )
        if len(pairs) == limit:
            break
    return pairs


TASKS: dict[str, PairedTask] = {
    task.name: task
    for task in (
        PairedTask(
            "relevance",
            ("own", "other"),
            "Context relevance, SQuAD v2 dev: an answerable question over its own paragraph vs another article's",
            relevance_pairs,
        ),
        PairedTask(
            "unanswerable",
            ("answerable", "unanswerable"),
            "Unanswerable questions, SQuAD v2 dev: an answerable question vs an unanswerable one "
            "(is_impossible) over the same paragraph",
            unanswerable_pairs,
        ),
        PairedTask(
            "removed",
            ("full", "removed"),
            "Answer sentence removed, SQuAD v2 dev: an answerable question over its paragraph vs over the "
            "paragraph without the sentence that holds the answer",
            removed_sentence_pairs,
        ),
    )
}
