"""The appended sentences as natural errors: does a citation vouch for a sentence its documents do
not hold?

Per dataset, the labelled sentences of the gold answers (label 1) against the sentences of other questions'
answers appended to them (0): the sentence-level AUROC of every signal of
[`rcattr.eval.groundedness.sentence_signals`][rcattr.eval.groundedness.sentence_signals], records resampled whole, each against the log-probability
with a paired interval; and the shares that `result.citations()` marks partial, weak or unsupported
([`rcattr.grounding.vouching.WEAK_BELOW`][rcattr.grounding.vouching.WEAK_BELOW], [`rcattr.grounding.vouching.UNSUPPORTED_BELOW`][rcattr.grounding.vouching.UNSUPPORTED_BELOW]) on each side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rcattr.eval.common.auroc import auroc_table, markdown
from rcattr.eval.groundedness.sentence_signals import derived

REFERENCE = "logprob"
MARKED = ("partial", "weak", "unsupported")  # what result.citations() marks; "partial" since 0.1.0


def _status_shares(sentences: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    n = max(len(sentences), 1)
    return {status: sum(sentence["status"] == status for sentence in sentences) / n for status in MARKED} | {
        "sentences": len(sentences)
    }


def foreign_tables(lines: Mapping[str, Sequence[Mapping[str, Any]]], seed: int = 0) -> dict[str, Any]:
    """Per dataset with vouched rows (lines of [`rcattr.eval.citations.rules.labelled`][rcattr.eval.citations.rules.labelled], both parts): the
    AUROC table and the status shares of the answers' and the appended sentences."""
    tables: dict[str, Any] = {}
    for dataset, rows in lines.items():
        kept = [line for line in rows if "skipped" not in line and line.get("foreign")]
        own = [(line["id"], s) for line in kept for s in line["sentences"]]
        foreign = [(line["id"], s) for line in kept for s in line["foreign"]]
        if not own or "vouch" not in own[0][1]:
            continue
        items = own + foreign
        tables[dataset] = {
            "auroc": auroc_table(
                [derived(sentence) for _, sentence in items],
                [1] * len(own) + [0] * len(foreign),
                REFERENCE,
                groups=[record for record, _ in items],
                seed=seed,
            ),
            "answers": _status_shares([s for _, s in own]),
            "appended": _status_shares([s for _, s in foreign]),
        }
    return tables


def foreign_markdown(tables: Mapping[str, Any]) -> str:
    """The tables of [`foreign_tables`][rcattr.eval.citations.foreign.foreign_tables]."""
    parts = []
    for dataset, table in tables.items():
        shares = "; ".join(
            name
            + ": "
            + ", ".join(
                f"{100 * table[name][status]:.1f}% {status}" for status in MARKED if status in table[name]
            )
            + f", {100 * sum(table[name].get(status, 0.0) for status in MARKED):.1f}% marked of "
            f"{table[name]['sentences']}"
            for name in ("answers", "appended")
        )
        parts.append(
            markdown(
                table["auroc"],
                f"### Appended sentences, {dataset}: the gold answers' sentences against another question's "
                f"(records with both, resampled whole). Marked by result.citations(): {shares}",
                REFERENCE,
            )
        )
    return "\n".join(parts)
