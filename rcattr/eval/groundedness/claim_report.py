"""The AttributionBench tables: how well each signal of
[`rcattr.eval.groundedness.claim_levers`][rcattr.eval.groundedness.claim_levers] tells the claims people judged attributable (1) from those they
did not (0).

- **AUROC** of every signal, its 95% bootstrap interval over claims, and its difference to the library's
  support, to lexical coverage and to the log-probability, each with its paired interval (the same draws);
- **marks**: macro-F1 and accuracy of each signal's own cut-off (the library's `status` for support, even
  odds for the probabilities), with the paired interval to the library's marks; the share of unattributable
  claims marked (caught) and of attributable ones marked; and for every signal the macro-F1 of a cut-off
  chosen by 10-fold cross-validation (on nine folds, applied to the tenth) beside the best single cut-off
  chosen on all the rows (optimistic: an upper bound, not a figure to publish);
- `combined`: a logistic regression over every signal, its probabilities out of fold (10-fold
  cross-validation), marked below 0.5; the coefficients of the fit on all rows come with it;
  `combined_one_pass` the same over the signals the attribution pass has without a second forward (no
  judge, entropy or all-heads lookback);
- every fold holds whole questions, and every bootstrap draw resamples whole questions, when the rows say their
  question (`question`, written since 0.2.0): a question's claims share its references and its answer, so
  a cut or a fit that saw some of them would be judged on their neighbours, and they do not vary apart; rows
  without it (older runs) are folded and resampled claim by claim, and the report says which;
- per source dataset, the AUROC of every signal;
- the cost of each signal in forwards: the median of its seconds over one plain forward of the prompt and
  claim, per claim.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from rcattr.eval.common.auroc import auroc, auroc_table, paired_table
from rcattr.eval.common.metrics import macro_f1
from rcattr.eval.groundedness.claim_levers import (
    LEVERS,
    REFERENCE,
    SIGNALS,
    claim_signals,
    marked,
    signal_matrix,
)
from rcattr.eval.groundedness.probe_report import probe_probabilities, row_features
from rcattr.eval.groundedness.self_calibration import self_cut
from rcattr.eval.groundedness.source_report import markdown as source_lines
from rcattr.eval.groundedness.source_report import source_tables

# the combiners' features: every signal, and those the attribution pass has without a second forward
COMBINERS = {
    "combined": SIGNALS,
    "combined_one_pass": (REFERENCE, *LEVERS[:3], "coverage", "logprob"),
}
FOLDS = 10
PROBE = "probe"  # the support probe's out-of-fold probability, where the rows have their heads
# the baselines the done-when compares the default with, each with its own paired interval
AGAINST = ("coverage", "logprob")
# seconds of each signal's work per claim, as the rows time them; log-probability is one plain forward
COST = {
    REFERENCE: ("attribute",),
    "logprob": ("forward",),
    "neg_entropy / lookback": ("statistics",),
    "coverage": ("coverage",),
    "judge": ("judge",),
    "support_judge": ("attribute", "judge"),
}


def best_cut(values: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The cut-off (attributable at or above it) with the best macro-F1 over `values`, and that F1."""
    candidates = np.append(np.unique(values), np.inf)  # inf: nothing attributable
    scores = [macro_f1(labels, (values >= cut).astype(int)) for cut in candidates]
    best = int(np.argmax(scores))
    return float(candidates[best]), float(scores[best])


def folds(
    labels: np.ndarray, seed: int, groups: Sequence[str] | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The `(train, test)` indices of up to [`FOLDS`][rcattr.eval.groundedness.claim_report.FOLDS] stratified folds; with `groups` (each claim's
    question), a group's claims all fall in one fold."""
    n_splits = min(FOLDS, int(np.bincount(labels).min()))
    if groups is None:
        splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(len(labels)), labels))
    grouped = StratifiedGroupKFold(n_splits=min(n_splits, len(set(groups))), shuffle=True, random_state=seed)
    return list(grouped.split(np.zeros(len(labels)), labels, groups))


def cross_validated_predictions(
    values: np.ndarray, labels: np.ndarray, seed: int, groups: Sequence[str] | None = None
) -> np.ndarray:
    """Each claim's prediction (1: attributable) by the [`best_cut`][rcattr.eval.groundedness.claim_report.best_cut] of the other folds."""
    predictions = np.zeros(len(values), dtype=int)
    for train, test in folds(labels, seed, groups):
        cut, _ = best_cut(values[train], labels[train])
        predictions[test] = values[test] >= cut
    return predictions


def combiner(
    features: np.ndarray,
    labels: np.ndarray,
    names: Sequence[str],
    seed: int,
    groups: Sequence[str] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Out-of-fold probabilities of a standardised logistic regression over the `[n, k]` features, and the
    fit on all rows (per signal of `names`, its coefficient on the standardised signal)."""
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    splits = folds(labels, seed, groups)
    probabilities = cross_val_predict(model, features, labels, cv=splits, method="predict_proba")[:, 1]
    model.fit(features, labels)
    fitted = model[-1]
    return probabilities, {
        "coefficients": dict(zip(names, np.round(fitted.coef_[0], 4).tolist(), strict=True)),
        "intercept": round(float(fitted.intercept_[0]), 4),
        "scaler_mean": np.round(model[0].mean_, 6).tolist(),
        "scaler_scale": np.round(model[0].scale_, 6).tolist(),
        "folds": len(splits),
    }


def own_marks(kept: Sequence[dict[str, Any]], signals: list[dict[str, float]]) -> list[dict[str, bool]]:
    """Per claim, whether each signal with a cut-off of its own marks it ([`marked`][rcattr.eval.groundedness.claim_levers.marked]; the combiners and
    the probe below even odds)."""
    own = [marked(row, values) for row, values in zip(kept, signals, strict=True)]
    for mark, row_signals in zip(own, signals, strict=True):
        mark.update({name: row_signals[name] < 0.5 for name in (*COMBINERS, PROBE) if name in row_signals})
    return own


def add_probe(
    kept: Sequence[dict[str, Any]],
    signals: list[dict[str, float]],
    labels: np.ndarray,
    heads: Sequence[dict[str, Any]],
    seed: int,
    groups: Sequence[str] | None,
) -> dict[str, int] | None:
    """Each claim's out-of-fold probe probability written into its `signals` ([`PROBE`][rcattr.eval.groundedness.claim_report.PROBE]), and how often
    each penalty was chosen; None, and nothing written, unless every claim has its `heads` row."""
    by_id = {row["id"]: row for row in heads if "skipped" not in row}
    if not by_id or not all(row["id"] in by_id for row in kept):
        return None
    claims = [row_features({**row, **by_id[row["id"]]}) for row in kept]
    groups = groups or [row["id"] for row in kept]
    probabilities, chosen = probe_probabilities(claims, labels, folds(labels, seed, groups), groups, seed)
    for values, probability in zip(signals, probabilities, strict=True):
        values[PROBE] = float(probability)
    return chosen


def source_marks(
    own: list[dict[str, bool]],
    signals: list[dict[str, float]],
    labels: np.ndarray,
    seed: int,
    groups: Sequence[str] | None,
    cut: float | None,
) -> tuple[list[dict[str, float]], list[dict[str, bool]]]:
    """The values and marks of the per-source table: the `own` marks, the log-probability's by a
    cross-validated cut (it has no cut-off of its own), and with a self-made `cut`, the support's marks
    below it (`calibrated`)."""
    logprob = np.array([values["logprob"] for values in signals])
    said = cross_validated_predictions(logprob, labels, seed, groups)
    marks = [dict(mark, logprob=not attributable) for mark, attributable in zip(own, said, strict=True)]
    if cut is None:
        return signals, marks
    for mark, values in zip(marks, signals, strict=True):
        mark["calibrated"] = values[REFERENCE] < cut
    return [dict(values, calibrated=values[REFERENCE]) for values in signals], marks


def marks_table(
    own: list[dict[str, bool]],
    signals: list[dict[str, float]],
    labels: np.ndarray,
    seed: int,
    n_boot: int,
    groups: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per signal, its `own` marks' macro-F1 (paired to the library's), accuracy and marking rates where it
    has a cut-off, the cross-validated cut's macro-F1 and the best single cut's."""
    predictions = [{name: float(not value) for name, value in mark.items()} for mark in own]
    own_f1 = paired_table(
        predictions, labels.tolist(), REFERENCE, macro_f1, "macro_f1", groups, n_boot=n_boot, seed=seed
    )
    table: dict[str, dict[str, Any]] = {}
    for name in signals[0]:
        values = np.array([row[name] for row in signals])
        cross = cross_validated_predictions(values, labels, seed, groups)
        entry: dict[str, Any] = {
            "cv_macro_f1": macro_f1(labels, cross),
            "cv_accuracy": float((cross == labels).mean()),
            "best_cut_macro_f1": best_cut(values, labels)[1],
        }
        if name in own_f1:
            marks = np.array([mark[name] for mark in own])
            entry.update(own_f1[name])
            entry["accuracy"] = float((marks != labels.astype(bool)).mean())
            entry["caught"] = float(marks[labels == 0].mean())
            entry["false_marks"] = float(marks[labels == 1].mean())
        table[name] = entry
    return table


def per_source(
    kept: Sequence[dict[str, Any]], signals: list[dict[str, float]], labels: np.ndarray
) -> dict[str, dict[str, float]]:
    """Per source dataset (and its count of claims), the AUROC of every signal."""
    out = {}
    for source in sorted({row["source"] for row in kept}):
        index = [i for i, row in enumerate(kept) if row["source"] == source]
        y = labels[index]
        if y.min() == y.max():
            continue
        out[source] = {
            "claims": len(index),
            **{name: float(auroc(y, [signals[i][name] for i in index])) for name in signals[0]},
        }
    return out


def cost(kept: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Per signal, the median over the claims that timed a plain forward of its seconds over the forward's."""
    timed = [row["seconds"] for row in kept if "forward" in row["seconds"]]
    return {
        name: statistics.median(
            sum(seconds[part] for part in parts) / seconds["forward"] for seconds in timed
        )
        for name, parts in COST.items()
        if timed
    }


def claim_report(
    rows: Sequence[dict[str, Any]],
    seed: int = 0,
    n_boot: int = 2000,
    heads: Sequence[dict[str, Any]] | None = None,
    made: Sequence[dict[str, Any]] = (),
) -> tuple[dict[str, Any], str]:
    """The AttributionBench tables of the rows, and their markdown (`n_boot` bootstrap draws); with every
    claim's `heads` row ([`rcattr.eval.groundedness.attributionbench.heads_row`][rcattr.eval.groundedness.attributionbench.heads_row]), the support probe's
    out-of-fold probabilities too ([`rcattr.eval.groundedness.probe_report.probe_probabilities`][rcattr.eval.groundedness.probe_report.probe_probabilities]); with the
    rows of the claims the model made for itself (`made`), the marks of its own cut-off on the support
    (`calibrated`, [`rcattr.eval.groundedness.self_calibration.self_cut`][rcattr.eval.groundedness.self_calibration.self_cut])."""
    kept = [row for row in rows if "skipped" not in row]
    skipped = Counter(row["source"] for row in rows if "skipped" in row)
    labels = np.array([row["label"] for row in kept], dtype=int)
    results: dict[str, Any] = {"claims": len(kept), "skipped": dict(skipped)}
    groups = [row["question"] for row in kept] if all("question" in row for row in kept) else None
    if len(kept) < 2 * FOLDS or labels.min() == labels.max() or (groups is not None and len(set(groups)) < 2):
        return (
            results,
            f"AttributionBench: {len(kept)} claims, too few (or too few questions) with both labels for the tables\n",
        )
    signals = [claim_signals(row) for row in kept]
    results["folds_by"] = "claim" if groups is None else "question"
    fits = {}
    for name, features in COMBINERS.items():
        matrix = np.array(signal_matrix(kept, features))
        probabilities, fits[name] = combiner(matrix, labels, features, seed, groups)
        for values, probability in zip(signals, probabilities, strict=True):
            values[name] = float(probability)
    probe_c = add_probe(kept, signals, labels, heads or (), seed, groups)
    if probe_c is not None:
        results["probe_c"] = probe_c
    own = own_marks(kept, signals)
    results["self_cut"] = self_cut(made)
    if results["self_cut"] is not None:
        results["self_made"] = dict(Counter(row["kind"] for row in made if "skipped" not in row))
    table_values, table_marks = source_marks(own, signals, labels, seed, groups, results["self_cut"])
    results.update(
        auroc=auroc_table(signals, labels.tolist(), REFERENCE, groups, n_boot=n_boot, seed=seed),
        auroc_against={
            baseline: auroc_table(signals, labels.tolist(), baseline, groups, n_boot=n_boot, seed=seed)
            for baseline in AGAINST
        },
        marks=marks_table(own, signals, labels, seed, n_boot, groups),
        per_source=per_source(kept, signals, labels),
        sources=source_tables(kept, table_values, table_marks, labels, groups, n_boot, seed),
        combiners=fits,
        cost=cost(kept),
    )
    return results, markdown(results)


def auroc_lines(
    aurocs: dict[str, dict[str, float]], against: dict[str, dict[str, dict[str, float]]]
) -> list[str]:
    """The AUROC table: per signal, its AUROC and interval, and its paired difference to support and to each
    baseline of [`AGAINST`][rcattr.eval.groundedness.claim_report.AGAINST]."""
    references = (REFERENCE, *against)
    tables = {REFERENCE: aurocs, **against}

    def difference(name: str, reference: str) -> str:
        v = tables[reference][name]
        return f"{v[f'minus_{reference}']:+.3f} [{v['difference_low']:+.3f}, {v['difference_high']:+.3f}]"

    return [
        "| signal | AUROC | 95% interval | "
        + " | ".join(f"minus {r} (paired 95%)" for r in references)
        + " |",
        "|---|---:|---|" + "---|" * len(references),
        *(
            f"| {name} | {v['auroc']:.3f} | [{v['low']:.3f}, {v['high']:.3f}] | "
            + " | ".join(difference(name, r) for r in references)
            + " |"
            for name, v in aurocs.items()
        ),
    ]


def markdown(results: dict[str, Any]) -> str:
    """The report's tables."""
    aurocs, marks = results["auroc"], results["marks"]
    head = next(iter(aurocs.values()))
    skipped = ", ".join(f"{n} {source}" for source, n in sorted(results["skipped"].items())) or "none"
    lines = [
        f"AttributionBench: {results['claims']} claims ({head['positives']} attributable, {head['negatives']} "
        f"not), skipped beyond the model's window: {skipped}; cross-validation folds and bootstrap "
        + (
            "draws hold whole questions"
            if results["folds_by"] == "question"
            else "draws hold single claims (the rows do not say their question)"
        ),
        "",
        *auroc_lines(aurocs, results["auroc_against"]),
        "",
        "| signal | macro-F1, own cut | minus support (paired 95%) | accuracy | unattributable marked | "
        "attributable marked | macro-F1, 10-fold cut | best single cut (optimistic) |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for name, v in marks.items():
        own = (
            f"{v['macro_f1']:.3f} | {v['minus_support']:+.3f} [{v['difference_low']:+.3f}, "
            f"{v['difference_high']:+.3f}] | {v['accuracy']:.3f} | {v['caught']:.1%} | {v['false_marks']:.1%}"
            if "macro_f1" in v
            else "— | — | — | — | —"
        )
        lines.append(f"| {name} | {own} | {v['cv_macro_f1']:.3f} | {v['best_cut_macro_f1']:.3f} |")
    sources = results["per_source"]
    names = list(aurocs)
    lines += [
        "",
        "AUROC per source dataset:",
        "",
        "| source | claims | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
        *(
            f"| {source} | {v['claims']} | " + " | ".join(f"{v[name]:.3f}" for name in names) + " |"
            for source, v in sources.items()
        ),
        "",
        "Pooled and per source, each with its 95% interval (marks: the signal's own cut-off; the "
        "log-probability's a 10-fold cross-validated cut):",
        "",
        *source_lines(results["sources"], cross_validated=("logprob",)),
        "",
        *(
            [f"The probe's penalty C, chosen per fold on its training claims: {results['probe_c']}", ""]
            if "probe_c" in results
            else []
        ),
        *(
            [
                f"calibrated: support below {results['self_cut']:.3f}, the cut-off that best tells the claims "
                f"the model made for itself apart (no label read; {results['self_made']})",
                "",
            ]
            if results.get("self_cut") is not None
            else []
        ),
        "Cost per claim, × one plain forward of the prompt and claim (median): "
        + ", ".join(f"{name} {value:.2f}" for name, value in results["cost"].items()),
        "",
    ]
    return "\n".join(lines)
