"""AttributionBench: sentences of real generative-search answers, each labelled by people as
attributable to its references or not, and what the library says of each.

Each claim (one sentence of an ExpertQA, Stanford-GenSearch, LFQA or AttributedQA answer) is teacher-forced
as the answer over its references (the documents) and its question. A row keeps what the library's
citations say ([`Citation.support`][rcattr.grounding.citations.Citation.support] and `status` of its weakest
sentence) and, so that every lever of [`rcattr.eval.groundedness.claim_levers`][rcattr.eval.groundedness.claim_levers] is computed from the rows
without the model, the pieces: each token's support log-odds and log-probability, the claim's content words
(stop words and citation markers left out) and whether the references hold each by its surface form, and
the baselines from the same tokens (lexical coverage, log-probability, entropy, the lookback ratio over
every head) and the model asked as a judge ([`rcattr.eval.groundedness.judge`][rcattr.eval.groundedness.judge]). The claims' own citation
markers (`[5]`) are the library's to handle ([`rcattr.grounding.claims.citation_markers`][rcattr.grounding.claims.citation_markers]); a claim whose prompt
does not fit the model's window is skipped, and the row says why.

The file is evaluation data, read by path and never shipped (`../shared/data/README.md`).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from rcattr.attribution.head_statistics import TokenStatistics, token_statistics
from rcattr.eval.groundedness.judge import judge_log_odds
from rcattr.grounding.claims import (
    citation_markers,
    claim_parts,
    content_coverage,
    stop_words,
    without_markers,
)
from rcattr.grounding.probe import claim_tokens, head_means
from rcattr.grounding.support import support_heads
from rcattr.record.signals import RCSignals
from rcattr.text.prompting import ContextInput
from rcattr.text.segmentation import tokens_within

if TYPE_CHECKING:
    from rcattr.attribution.attributor import RCAttributor

DEFAULT_PATH = Path("../shared/data/attributionbench/dev.jsonl")
# worst last: a claim of several sentences takes its weakest sentence's status
STATUSES = ("supported", "partial", "weak", "unsupported")
_WORD = re.compile(r"\w+(?:[.,]\d+)*")
T = TypeVar("T")


@dataclass(frozen=True)
class ClaimRecord:
    """One labelled claim: `attributable` is the people's label, `source` the dataset it came from."""

    id: str
    question: str
    claim: str
    references: tuple[str, ...]
    attributable: bool
    source: str


def load_claims(
    path: str | Path = DEFAULT_PATH, limit: int | None = None, seed: int = 0
) -> list[ClaimRecord]:
    """The claims of an AttributionBench file (one JSON object per line), in file order; with `limit`, a
    seeded draw of that many (the file is sorted by source and label, so its head is not a sample)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no AttributionBench file at {path}: give its path with --claims-file "
            "(the dev split is ../shared/data/attributionbench/dev.jsonl, see ../shared/data/README.md)"
        )
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            records.append(
                ClaimRecord(
                    str(row["id"]),
                    row["question"],
                    row["claim"],
                    tuple(row["references"]),
                    row["attribution_label"] == "attributable",
                    row["src_dataset"],
                )
            )
    if limit is not None and limit < len(records):
        keep = sorted(random.Random(seed).sample(range(len(records)), limit))
        records = [records[i] for i in keep]
    return records


def content_words(text: str, references: tuple[str, ...]) -> list[tuple[int, int, bool]]:
    """The `(start, end, held)` of each content word of `text` (a word with a part that is no stop word,
    [`claim_parts`][rcattr.grounding.claims.claim_parts]) outside its citation markers; `held`: every part of it occurs in the
    `references`."""
    markers = citation_markers(text)
    known = {part for reference in references for part in claim_parts(reference)}
    words = []
    for match in _WORD.finditer(text):
        if any(a <= match.start() < b for a, b in markers):
            continue
        parts = [part for part in claim_parts(match.group()) if part not in stop_words()]
        if parts:
            words.append((match.start(), match.end(), all(part in known for part in parts)))
    return words


def _timed(seconds: dict[str, float], name: str, run: Callable[[], T]) -> T:
    start = time.perf_counter()
    value = run()
    seconds[name] = round(time.perf_counter() - start, 4)
    return value


def _rounded(values: torch.Tensor) -> list[float]:
    return [round(float(value), 4) for value in values]


def claim_row(
    attributor: RCAttributor, record: ClaimRecord, time_forward: bool = True
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the library and the baselines say of `record`'s claim, teacher-forced over its references (or
    `skipped` with the reason when its prompt does not fit the model's window), and its [`heads_row`][rcattr.eval.groundedness.attributionbench.heads_row]
    from the same statistics. Each part's seconds are kept, and with `time_forward` those of one plain
    forward of the prompt and claim, the unit of cost."""
    head = {
        "id": record.id,
        "question": record.question,
        "source": record.source,
        "label": int(record.attributable),
    }
    inp = ContextInput(list(record.references), record.question)
    try:
        example = attributor.prepare(inp, record.claim, "sentence")
    except ValueError as error:
        return {**head, "skipped": str(error)}, {"id": record.id, "skipped": str(error)}
    seconds: dict[str, float] = {}
    if time_forward:
        with torch.no_grad():
            _timed(
                seconds, "forward", lambda: attributor.model(example.ids, use_cache=False, logits_to_keep=1)
            )
    result = _timed(seconds, "attribute", lambda: attributor.attribute(inp, target=record.claim))
    citations = result.citations()
    statistics = _timed(seconds, "statistics", lambda: token_statistics(attributor.model, example))
    coverage = _timed(
        seconds, "coverage", lambda: content_coverage(without_markers(record.claim), record.references)
    )
    judge = _timed(
        seconds,
        "judge",
        lambda: judge_log_odds(attributor, record.references, without_markers(record.claim)),
    )
    tokens = result.answer_tokens
    kept = claim_tokens(tokens, record.claim)
    log_odds = statistics.support_log_odds(support_heads(RCSignals.of(result).head_selection.scores))
    lookback = statistics.lookback.mean((0, 1))
    support = min(c.support for c in citations if c.support is not None)
    row = {
        **head,
        "support": support,
        "held_support": min(c.held_support for c in citations if c.held_support is not None),
        "status": max((c.status for c in citations if c.status), key=STATUSES.index),
        "sentences": len(citations),
        "claims": [[claim.kind, claim.held, claim.support] for c in citations for claim in c.claims],
        "coverage": coverage,
        "logprob": float(statistics.logprob[kept[1:] or kept].mean()),
        "neg_entropy": -float(statistics.entropy[kept].mean()),
        "lookback": float(lookback[kept].mean()),
        "judge": judge,
        "log_odds": _rounded(log_odds),
        "token_logprob": _rounded(statistics.logprob),
        "words": [
            [int(held), tokens_within(tokens, start, end)]
            for start, end, held in content_words(record.claim, record.references)
        ],
        "seconds": seconds,
    }
    return row, _heads(record.id, statistics, kept)


def heads_row(attributor: RCAttributor, record: ClaimRecord) -> dict[str, Any]:
    """Per head, the mean lookback ratio and peak superiority over `record`'s claim tokens (the support probe's
    per-head features, [`ClaimFeatures`][rcattr.grounding.probe.ClaimFeatures]) from one forward, for a claim whose
    [`claim_row`][rcattr.eval.groundedness.attributionbench.claim_row] was written before the rows had them; `skipped` as [`claim_row`][rcattr.eval.groundedness.attributionbench.claim_row]'s."""
    inp = ContextInput(list(record.references), record.question)
    try:
        example = attributor.prepare(inp, record.claim, "sentence")
    except ValueError as error:
        return {"id": record.id, "skipped": str(error)}
    statistics = token_statistics(attributor.model, example)
    return _heads(record.id, statistics, claim_tokens(example.answer_tokens, record.claim))


def _heads(claim_id: str, statistics: TokenStatistics, tokens: list[int]) -> dict[str, Any]:
    lookback, peak = head_means(statistics.lookback, statistics.peak, tokens)
    return {
        "id": claim_id,
        "head_shape": list(lookback.shape),
        "head_lookback": _rounded(torch.from_numpy(lookback.ravel())),
        "head_peak": _rounded(torch.from_numpy(peak.ravel())),
    }
