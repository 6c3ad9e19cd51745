"""The AttributionBench table pooled and per source dataset: for each of a few signals, its AUROC,
its marks' macro-F1, the share of unattributable claims its marks catch and the share of attributable ones
they mark, each with a 95% bootstrap interval (whole questions drawn where the rows say their question).

A signal's marks are its own cut-off's where it has one (the library's `status` for support, below even odds
for the probabilities); the log-probability has none, so its marks are those of a cut chosen by
cross-validation ([`rcattr.eval.groundedness.claim_report.cross_validated_predictions`][rcattr.eval.groundedness.claim_report.cross_validated_predictions]), and the table says
so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rcattr.eval.common.auroc import auroc_table, paired_table
from rcattr.eval.common.metrics import macro_f1

# the signals of the table, where the rows have them
SIGNALS = ("support", "coverage", "logprob", "calibrated", "probe")
Score = Callable[[np.ndarray, np.ndarray], float]


def caught(labels: np.ndarray, attributable: np.ndarray) -> float:
    """The share of the unattributable claims (label 0) marked."""
    return float((np.asarray(attributable)[np.asarray(labels) == 0] == 0).mean())


def falsely_marked(labels: np.ndarray, attributable: np.ndarray) -> float:
    """The share of the attributable claims (label 1) marked."""
    return float((np.asarray(attributable)[np.asarray(labels) == 1] == 0).mean())


MEASURES: dict[str, Score] = {"macro_f1": macro_f1, "caught": caught, "falsely_marked": falsely_marked}


def source_table(
    values: Sequence[dict[str, float]],
    marks: Sequence[dict[str, bool]],
    labels: np.ndarray,
    groups: Sequence[str],
    n_boot: int,
    seed: int,
) -> dict[str, dict[str, float]]:
    """Per signal, its AUROC and each of [`MEASURES`][rcattr.eval.groundedness.source_report.MEASURES] of its `marks` (True: marked), each with
    `low` and `high` of its interval, and its AUROC's paired difference to the first signal's
    (`auroc_minus`), over the claims whose `values` and `labels` are given."""
    names = [name for name in SIGNALS if name in values[0]]
    table = {
        name: {
            "auroc": v["auroc"],
            "auroc_low": v["low"],
            "auroc_high": v["high"],
            "auroc_minus": v[f"minus_{names[0]}"],
            "auroc_minus_low": v["difference_low"],
            "auroc_minus_high": v["difference_high"],
        }
        for name, v in auroc_table(
            [{n: row[n] for n in names} for row in values], labels.tolist(), names[0], groups, n_boot, seed
        ).items()
    }
    said = [{name: float(not mark[name]) for name in names} for mark in marks]
    for key, score in MEASURES.items():
        for name, v in paired_table(
            said, labels.tolist(), names[0], score, key, groups, n_boot, seed
        ).items():
            table[name].update({key: v[key], f"{key}_low": v["low"], f"{key}_high": v["high"]})
    return table


def source_tables(
    kept: Sequence[dict[str, Any]],
    values: Sequence[dict[str, float]],
    marks: Sequence[dict[str, bool]],
    labels: np.ndarray,
    groups: Sequence[str] | None,
    n_boot: int,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """[`source_table`][rcattr.eval.groundedness.source_report.source_table] pooled (`"all"`) and per source dataset with both labels, each with its count
    of claims."""
    groups = list(groups) if groups is not None else [str(i) for i in range(len(kept))]
    subsets = {"all": list(range(len(kept)))}
    for source in sorted({row["source"] for row in kept}):
        subsets[source] = [i for i, row in enumerate(kept) if row["source"] == source]
    out = {}
    for source, index in subsets.items():
        y = labels[index]
        if y.min() == y.max():
            continue
        out[source] = {
            "claims": len(index),
            "signals": source_table(
                [values[i] for i in index],
                [marks[i] for i in index],
                y,
                [groups[i] for i in index],
                n_boot,
                seed,
            ),
        }
    return out


def markdown(tables: dict[str, dict[str, Any]], cross_validated: Sequence[str]) -> list[str]:
    """The table's lines: one row per source and signal; `cross_validated` names the signals whose marks are
    a cross-validated cut's."""

    def cell(v: dict[str, float], key: str, form: str = "{:.3f}") -> str:
        return f"{form.format(v[key])} [{form.format(v[key + '_low'])}, {form.format(v[key + '_high'])}]"

    lines = [
        f"| source (claims) | signal | AUROC | AUROC − {SIGNALS[0]} (paired) | macro-F1 of the marks | "
        "unattributable caught | attributable marked |",
        "|---|---|---|---|---|---|---|",
    ]
    for source, entry in tables.items():
        for name, v in entry["signals"].items():
            label = f"{name} (cross-validated cut)" if name in cross_validated else name
            lines.append(
                f"| {source} ({entry['claims']}) | {label} | {cell(v, 'auroc')} | {cell(v, 'auroc_minus', '{:+.3f}')} "
                f"| {cell(v, 'macro_f1')} | {cell(v, 'caught', '{:.1%}')} | {cell(v, 'falsely_marked', '{:.1%}')} |"
            )
    return lines
