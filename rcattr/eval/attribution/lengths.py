"""Sources of different lengths: SQuAD v2 questions whose gold source is much shorter, or much longer, than
the documents beside it.

A document's score that grows with its length wins citations it does not deserve, and the attribution
benchmark's files cannot show it: their sources have similar lengths. [`length_records`][rcattr.eval.attribution.lengths.length_records] builds the two
directions from the answerable questions of SQuAD v2 dev (`squad_v2/dev-v2.0.json`):

* `short_gold`: the gold source is the sentence of the question's paragraph that holds the answer, alone,
  among whole paragraphs;
* `long_gold`: the gold source is the whole paragraph, among single sentences of other paragraphs.

Distractors come from the paragraph's own article (up to half of them) and from the others, never the
question's paragraph nor a text holding the answer. The answer, teacher-forced, is the question's first gold
answer text, one output unit whose gold source is the record's gold document. Each record has 4 to 6
documents, the gold one at a random place; one question per paragraph, in an order seeded by
[`SEED`][rcattr.eval.attribution.lengths.SEED], so a run is reproducible and `--limit` takes the first of a fixed list. [`length_ratio`][rcattr.eval.attribution.lengths.length_ratio]
is a record's gold document's characters over its distractors' mean.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from rcattr.eval.common.datasets import BenchmarkRecord, GoldSpan, load_attribution
from rcattr.eval.kv.data import squad_articles
from rcattr.text.segmentation import sentence_spans

SETTINGS = ("short_gold", "long_gold")
DATASETS = {f"squad_{setting}": setting for setting in SETTINGS}  # the benchmark's dataset names
SEED = 0
DOCUMENTS = (4, 6)  # the fewest and most documents of a record
MIN_WORDS = 6  # a distractor sentence has at least this many words (no headings, no fragments)


def length_ratio(record: BenchmarkRecord) -> float:
    """The gold document's characters over the mean of the other documents'."""
    gold = record.gold[0].source
    others = [len(chunk) for index, chunk in enumerate(record.chunks) if index != gold]
    return len(record.chunks[gold]) / (sum(others) / len(others))


def _sentences(text: str) -> list[str]:
    return [span.text for span in sentence_spans(text) if len(span.text.split()) >= MIN_WORDS]


def _question(paragraph: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """The first answerable question of `paragraph` whose first answer lies in one sentence: its id, text,
    answer and that sentence; None when there is none."""
    context = paragraph["context"]
    for qa in paragraph["qas"]:
        if qa["is_impossible"]:
            continue
        answer = qa["answers"][0]
        text, start = answer["text"].strip(), answer["answer_start"]
        inside = [s for s in sentence_spans(context) if s.start <= start and start + len(text) <= s.end]
        if text and inside:
            return qa["id"], qa["question"], text, inside[0].text
    return None


def length_records(setting: str, limit: int | None = None, seed: int = SEED) -> list[BenchmarkRecord]:
    """The first `limit` records of `setting` (`"short_gold"` or `"long_gold"`), one question per
    paragraph of SQuAD v2 dev, in an order seeded by `seed`."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {', '.join(SETTINGS)}, got {setting!r}")
    articles = [article["paragraphs"] for article in squad_articles()]
    texts = [[_texts(paragraph["context"], setting) for paragraph in paragraphs] for paragraphs in articles]
    places = [(a, p) for a, paragraphs in enumerate(articles) for p in range(len(paragraphs))]
    random.Random(seed).shuffle(places)
    records: list[BenchmarkRecord] = []
    for a, p in places:
        if limit is not None and len(records) >= limit:
            break
        found = _question(articles[a][p])
        if found is None:
            continue
        qa_id, question, answer, sentence = found
        rng = random.Random(f"{seed}:{setting}:{qa_id}")
        kept = [
            [text for q, held in enumerate(texts[b]) if (b, q) != (a, p) for text in held]
            for b in range(len(texts))
        ]
        own = [text for text in kept[a] if answer.lower() not in text.lower()]
        others = [
            text
            for b, pool in enumerate(kept)
            if b != a
            for text in pool
            if answer.lower() not in text.lower()
        ]
        count = rng.randint(*DOCUMENTS) - 1
        mine = min(len(own), count // 2)
        distractors = rng.sample(own, mine) + rng.sample(others, count - mine)
        rng.shuffle(distractors)
        at = rng.randint(0, count)
        gold = sentence if setting == "short_gold" else articles[a][p]["context"]
        records.append(
            BenchmarkRecord(
                id=f"{setting}-{qa_id}",
                question=question,
                chunks=[*distractors[:at], gold, *distractors[at:]],
                answer=answer,
                gold=[GoldSpan(0, len(answer), answer, at)],
            )
        )
    return records


def _texts(context: str, setting: str) -> Sequence[str]:
    """A paragraph's candidate distractors: itself whole (short gold), or its sentences (long gold)."""
    return [context] if setting == "short_gold" else _sentences(context)


def load_records(dataset: str, split: str = "dev", limit: int | None = None) -> list[BenchmarkRecord]:
    """The attribution benchmark's records: a file of [`load_attribution`][rcattr.eval.common.datasets.load_attribution],
    or a direction of the length benchmark (`squad_short_gold`, `squad_long_gold`: SQuAD v2 dev only)."""
    if dataset not in DATASETS:
        return load_attribution(dataset, split, limit)
    if split != "dev":
        raise ValueError(f"{dataset} is built from SQuAD v2 dev only: --split dev, got {split!r}")
    return length_records(DATASETS[dataset], limit)
