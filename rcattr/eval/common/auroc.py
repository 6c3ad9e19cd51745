"""AUROC of signals telling supported items (label 1) from unsupported ones (0), with bootstrap intervals and
paired differences to a reference signal: the natural-error benchmarks' tables."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.integrate import trapezoid

from rcattr.eval.common.metrics import resampled_summary

Score = Callable[[np.ndarray, np.ndarray], float]


def auroc(labels: Sequence[int] | np.ndarray, values: Sequence[float] | np.ndarray) -> float:
    """sklearn's `roc_auc_score(labels, values)` for 0/1 (or boolean) labels, by the same arithmetic (the ROC
    curve's corners, the trapezoidal rule), so that the figures are sklearn's to the last bit; without its input
    checks, which cost milliseconds a call in bootstraps of tens of thousands of calls. NaN where one class only
    is present (as sklearn, less its warning); ValueError for values that are not finite or lengths that differ."""
    y, x = np.asarray(labels).astype(bool), np.asarray(values, dtype=float)
    if y.shape != x.shape or y.ndim != 1:
        raise ValueError(f"labels {y.shape} and values {x.shape} must be one-dimensional and of one length")
    if not np.isfinite(x).all():
        raise ValueError("values hold NaN or infinity")
    if y.all() or not y.any():
        return float("nan")
    order = np.argsort(x, kind="stable")[::-1]
    x, y = x[order], y[order]
    thresholds = np.r_[np.nonzero(np.diff(x))[0], len(x) - 1]
    true_positives = np.cumsum(y, dtype=np.float64)[thresholds]
    false_positives = 1 + thresholds.astype(np.float64) - true_positives
    if len(thresholds) > 2:  # sklearn's drop_intermediate: points between collinear neighbours
        corners = (
            np.r_[True, np.diff(false_positives, 2) != 0, True]
            | np.r_[True, np.diff(true_positives, 2) != 0, True]
        )
        true_positives, false_positives = true_positives[corners], false_positives[corners]
    tpr = np.r_[0.0, true_positives] / true_positives[-1]
    fpr = np.r_[0.0, false_positives] / false_positives[-1]
    return float(trapezoid(tpr, fpr))


def auroc_table(
    items: Sequence[dict[str, float]],
    labels: Sequence[int],
    reference: str,
    groups: Sequence[str] | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Per signal of `items`, the AUROC of telling the `labels` 1 (supported) from 0, with a 95%
    bootstrap interval, and its difference to `reference` with the paired interval (the same draws).
    `groups` (e.g. the record of each item) are resampled whole, each item its own by default; a draw with
    one label only is dropped. Empty when the items do not have both labels."""
    return paired_table(items, labels, reference, auroc, "auroc", groups, n_boot, seed)


def paired_table(
    items: Sequence[dict[str, float]],
    labels: Sequence[int],
    reference: str,
    score: Score,
    key: str,
    groups: Sequence[str] | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """[`auroc_table`][rcattr.eval.common.auroc.auroc_table] for any `score(labels, values)` (macro-F1 of predictions, say), under `key`."""
    y = np.asarray(labels, dtype=int)
    if not items or y.min() == y.max():
        return {}
    members: dict[str, list[int]] = {}
    for index, group in enumerate(groups if groups is not None else map(str, range(len(items)))):
        members.setdefault(group, []).append(index)
    blocks = list(members.values())
    rng = np.random.default_rng(seed)
    draws = [
        np.concatenate([blocks[b] for b in rng.integers(0, len(blocks), len(blocks))]) for _ in range(n_boot)
    ]
    draws = [d for d in draws if 0 < y[d].sum() < len(d)]

    def scores(signal: str) -> tuple[float, np.ndarray]:
        x = np.array([item[signal] for item in items], dtype=float)
        return float(score(y, x)), np.array([score(y[d], x[d]) for d in draws])

    base, base_draws = scores(reference)
    table = {}
    for signal in items[0]:
        value, resampled = (base, base_draws) if signal == reference else scores(signal)
        table[signal] = {
            **resampled_summary(value, resampled, base, base_draws, reference, key),
            "positives": int(y.sum()),
            "negatives": int(len(y) - y.sum()),
        }
    return table


def table_lines(table: dict[str, dict[str, float]], reference: str) -> list[str]:
    """The markdown table of an AUROC table: per signal, its AUROC, interval and paired difference."""
    return [
        f"| signal | AUROC | 95% interval | minus {reference} (paired 95% interval) |",
        "|---|---:|---|---|",
        *(
            f"| {name} | {v['auroc']:.3f} | [{v['low']:.3f}, {v['high']:.3f}] | "
            f"{v[f'minus_{reference}']:+.3f} [{v['difference_low']:+.3f}, {v['difference_high']:+.3f}] |"
            for name, v in table.items()
        ),
    ]


def markdown(table: dict[str, dict[str, float]], description: str, reference: str) -> str:
    """One AUROC table under its description and its counts of positives and negatives."""
    if not table:
        return f"{description}: no rows with both labels\n"
    counts = next(iter(table.values()))
    head = f"{description}: {counts['positives']} against {counts['negatives']}"
    return head + "\n\n" + "\n".join(table_lines(table, reference)) + "\n"
