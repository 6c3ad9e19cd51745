"""One benchmark line per record: each answer sentence's gold documents, the documents' shares of its
attribution and the signals a no-citation rule may read."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from rcattr.attribution.result import RCAttributionResult
from rcattr.eval.common.datasets import BenchmarkRecord, GoldSpan
from rcattr.grounding.support import SUPPORT_THRESHOLD
from rcattr.record.signals import RCSignals
from rcattr.text.segmentation import TextSpan, sentence_spans, tokens_within

HELD_BACK = 3
"""One question in `HELD_BACK` (by a hash of its text) is held back: its records check the chosen rule."""


def held_back(record: BenchmarkRecord) -> bool:
    """Whether `record` is in the held-back part. Records are split by question, so the summaries and
    statements of one question stay in one part."""
    digest = hashlib.sha256(record.question.encode()).digest()
    return int.from_bytes(digest[:8], "big") % HELD_BACK == 0


def foreign_sentence(record: BenchmarkRecord, pool: Sequence[BenchmarkRecord], seed: int) -> str:
    """A sentence of the answer of another question in `pool` (the whole file, so that `--limit` changes
    no draw), drawn with `seed` and the record's id: appended to the record's answer, a sentence its
    documents do not support (gold: no document), for the no-citation rule."""
    rng = random.Random(f"{seed}:{record.id}")
    others = [other for other in pool if other.question != record.question]
    sentences = sentence_spans(others[rng.randrange(len(others))].answer)
    return sentences[rng.randrange(len(sentences))].text


def gold_documents(sentence: TextSpan, gold: Sequence[GoldSpan]) -> list[int]:
    """The sources of the gold spans that overlap `sentence` (character offsets of the answer)."""
    return sorted({span.source for span in gold if span.start < sentence.end and sentence.start < span.end})


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def sentence_rows(result: RCAttributionResult, record: BenchmarkRecord) -> list[dict[str, Any]]:
    """Per output unit (answer sentence) of `result`: its offsets, gold documents (the sources of the
    record's gold spans it overlaps), the `[n_documents]` shares of its attribution, and its context reliance,
    mean and least token support, share of unsupported tokens and mean groundedness."""
    rc = RCSignals.of(result)
    support, groundedness = rc.token_support.tolist(), rc.groundedness.tolist()
    rows = []
    for unit, sentence in enumerate(result.output_spans):
        tokens = tokens_within(result.answer_tokens, sentence.start, sentence.end)
        unit_support = [support[t] for t in tokens]
        rows.append(
            {
                "start": sentence.start,
                "end": sentence.end,
                "gold": gold_documents(sentence, record.gold),
                "shares": [round(share, 6) for share in result.document_scores(unit).tolist()],
                "reliance": float(rc.unit_context_reliance[unit]),
                "support": _mean(unit_support),
                "least_support": min(unit_support, default=None),
                "unsupported": _mean([float(s < SUPPORT_THRESHOLD) for s in unit_support]),
                "groundedness": _mean([groundedness[t] for t in tokens]),
            }
        )
    return rows
