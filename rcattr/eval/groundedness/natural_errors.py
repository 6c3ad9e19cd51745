"""Natural errors: the model's own answers to answerable SQuAD v2 questions, right or wrong by
the gold answers, and the numbers, dates and names in them that the gold answers contradict.

Labels come from the gold answers, never from a detector (SQuAD's normalisation: case, punctuation,
articles and spaces dropped):

- an answer is **right** when it holds every token of one gold answer, **wrong** when it shares no token with
  any (token F1 = 0); an answer in between (partly right) is counted and left out;
- a claim ([`rcattr.grounding.claims`][rcattr.grounding.claims]) of a right answer is **right** when a gold answer holds it whole; a claim of
  a wrong answer is **contradicted** when a gold answer makes a claim of the same kind (a number, a date, a
  name) and none holds this one. Other claims are left out, as are a claim the question holds (the answer
  restating it) and one the token cap cut (at the end of an answer that stops mid-sentence).

Each answer's sentences are scored as `result.citations()` scores them ([`rcattr.eval.groundedness.
sentence_signals`][rcattr.eval.groundedness.
sentence_signals]); the answer's signal is its weakest sentence's (the one a reader is warned about).
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.head_statistics import token_statistics
from rcattr.eval.common.auroc import auroc_table, markdown
from rcattr.eval.groundedness.sentence_signals import SIGNALS, citation_signals, derived
from rcattr.eval.kv import data as kv_data
from rcattr.grounding.claims import claim_parts, claim_spans
from rcattr.text.prompting import ContextInput
from rcattr.text.segmentation import tokens_within

REFERENCE = "logprob"
CLAIM_SIGNALS = ("held", "rc", "held_rc", "logprob", "neg_entropy", "lookback")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_FINISHED = re.compile(r"[.!?][\"')\]»”’]*\s*$")


def normalised_tokens(text: str) -> list[str]:
    """SQuAD's answer normalisation: lower case, punctuation and articles dropped, split on whitespace."""
    text = "".join(char for char in text.lower() if char not in string.punctuation)
    return _ARTICLES.sub(" ", text).split()


def token_f1(prediction: str, gold: str) -> tuple[float, float]:
    """SQuAD's token F1 of `prediction` against `gold`, and the share of `gold`'s tokens it holds."""
    predicted, wanted = normalised_tokens(prediction), normalised_tokens(gold)
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if not common:
        return 0.0, 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall), recall


def correctness(answer: str, golds: Sequence[str]) -> str:
    """`"right"` (every token of a gold answer in it), `"wrong"` (F1 0 against each) or `"partly"`."""
    scores = [token_f1(answer, gold) for gold in golds]
    if any(recall == 1.0 for _, recall in scores):
        return "right"
    return "wrong" if all(f1 == 0.0 for f1, _ in scores) else "partly"


def questions(limit: int, seed: int) -> list[kv_data.KVRecord]:
    """`limit` answerable SQuAD v2 dev questions drawn with `seed` over the whole file (every article)."""
    pool = kv_data.load_squad()
    return random.Random(seed).sample(pool, min(limit, len(pool)))


def claim_label(text: str, kind: str, answer_label: str, record: kv_data.KVRecord) -> str | None:
    """`"right"`, `"contradicted"` or None (left out) for one claim of an answer labelled `answer_label`
    to `record`'s question."""
    parts, golds = set(claim_parts(text)), record.answers
    if parts <= set(claim_parts(record.question)):
        return None
    held = any(parts <= set(claim_parts(gold)) for gold in golds)
    if answer_label == "right":
        return "right" if held else None
    gold_kinds = {k for gold in golds for _, _, k in claim_spans(gold)}
    return "contradicted" if answer_label == "wrong" and not held and kind in gold_kinds else None


def answer_row(
    attributor: RCAttributor, record: kv_data.KVRecord, gen_args: dict[str, Any]
) -> dict[str, Any]:
    """The model's answer to `record`, its sentences' signals and its claims' (each claim: kind, text,
    held, least token support, whether the token cap cut it, and the baselines over its tokens)."""
    inp = ContextInput(record.context, record.question)
    result = attributor.attribute(inp, target=None, granularity="sentence", gen_args=gen_args)
    statistics = token_statistics(attributor.model, attributor.prepare(inp, result.answer, "sentence"))
    lookback = statistics.lookback.mean((0, 1))
    sentences, claims = [], []
    cut = None if _FINISHED.search(result.answer) else len(result.answer.rstrip())
    for citation in result.citations():
        sentences.append(citation_signals(result, citation, statistics))
        for claim in citation.claims:
            tokens = tokens_within(result.answer_tokens, claim.start, claim.end)
            claims.append(
                {
                    "text": claim.text,
                    "kind": claim.kind,
                    "held": claim.held,
                    "rc": claim.support,
                    "cut": claim.end == cut,
                    "logprob": float(statistics.logprob[tokens].mean()),
                    "neg_entropy": -float(statistics.entropy[tokens].mean()),
                    "lookback": float(lookback[tokens].mean()),
                }
            )
    return {"answer": result.answer, "sentences": sentences, "claims": claims}


def labelled(rows: Sequence[dict[str, Any]], records: Sequence[kv_data.KVRecord]) -> list[dict[str, Any]]:
    """The rows with their answer's [`correctness`][rcattr.eval.groundedness.natural_errors.correctness] in `label` and each claim's [`claim_label`][rcattr.eval.groundedness.natural_errors.claim_label]
    (None for a claim the token cap cut), by the gold answers of `records` (the rows' `id`)."""
    by_id = {record.id: record for record in records}
    out = []
    for row in rows:
        record = by_id[row["id"]]
        label = correctness(row["answer"], record.answers)
        claims = [
            {
                **claim,
                "label": None if claim["cut"] else claim_label(claim["text"], claim["kind"], label, record),
            }
            for claim in row["claims"]
        ]
        out.append({**row, "label": label, "claims": claims})
    return out


def answer_signals(row: dict[str, Any]) -> dict[str, float]:
    """An answer's signals: per signal, its weakest sentence's value (`sentence_signals.derived`)."""
    per_sentence = [derived(sentence) for sentence in row["sentences"]]
    return {name: min(values[name] for values in per_sentence) for name in SIGNALS} if per_sentence else {}


def claim_signals(claim: dict[str, Any]) -> dict[str, float]:
    """A claim's signals: `held` (0 or 1), `rc` (its least token support), `held_rc` (`rc` when held,
    else 0, what a citation reads) and the baselines over its tokens."""
    rc = 1.0 if claim["rc"] is None else claim["rc"]
    return {
        "held": float(claim["held"]),
        "rc": rc,
        "held_rc": rc if claim["held"] else 0.0,
        **{name: claim[name] for name in ("logprob", "neg_entropy", "lookback")},
    }


def answer_table(rows: Sequence[dict[str, Any]], seed: int = 0) -> dict[str, dict[str, float]]:
    """The AUROC of every answer signal, right (1) against wrong (0) answers."""
    kept = [row for row in rows if row["label"] in ("right", "wrong") and row["sentences"]]
    return auroc_table(
        [answer_signals(row) for row in kept], [row["label"] == "right" for row in kept], REFERENCE, seed=seed
    )


def claim_table(rows: Sequence[dict[str, Any]], seed: int = 0) -> dict[str, dict[str, float]]:
    """The AUROC of every claim signal, right (1) against contradicted (0) claims, resampled by answer."""
    claims = [(i, claim) for i, row in enumerate(rows) for claim in row["claims"] if claim["label"]]
    return auroc_table(
        [claim_signals(claim) for _, claim in claims],
        [claim["label"] == "right" for _, claim in claims],
        REFERENCE,
        groups=[str(i) for i, _ in claims],
        seed=seed,
    )


def report(
    rows: Sequence[dict[str, Any]], records: Sequence[kv_data.KVRecord], seed: int = 0
) -> tuple[dict[str, Any], str]:
    """The natural-error tables of the SQuAD rows of `records` ([`labelled`][rcattr.eval.groundedness.natural_errors.labelled]), and their markdown."""
    rows = labelled(rows, records)
    labels = Counter(row["label"] for row in rows)
    answers, claims = answer_table(rows, seed), claim_table(rows, seed)
    counted = ", ".join(f"{labels[name]} {name}" for name in ("right", "partly", "wrong"))
    text = "\n".join(
        [
            markdown(
                answers,
                f"Natural errors, SQuAD v2 dev: the model's own answers, right against wrong ({counted}; "
                "an answer's signal is its weakest sentence's)",
                REFERENCE,
            ),
            markdown(
                claims,
                "Contradicted claims: the numbers, dates and names of right answers that a gold answer holds, "
                "against those of wrong answers that the gold answers contradict",
                REFERENCE,
            ),
        ]
    )
    return {"labels": dict(labels), "answers": answers, "claims": claims}, text
