"""The KV benchmark's `results.json`: every cache setting's lines aggregated.

* [`summarise`][rcattr.eval.kv.results.summarise]: per method label, the means over the records every label has (so every row is
  measured on the same records); RCKVCache's VER and answer quality against each press's at the same
  compression (linear interpolation between the press's measured points, record by record), with paired
  bootstrap intervals of the differences; each RCKVCache variant's VER at 50% and 70% compression
  (interpolated over its `c` values) against the default's; the rank correlation of per-head
  compression with the per-head RC score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from rcattr.eval.common.metrics import paired_mean_difference
from rcattr.eval.kv.variants import PAPER_VARIANT

METRICS = ("ver", "rouge1", "rougeL", "match", "compression_ratio", "bytes_ratio", "seconds")
LEVER_RATIOS = (0.5, 0.7)  # where the RCKVCache variants are compared (interpolated over c)
BASELINE_WINDOW = 16  # RCKVCache's default window: the variants are compared with it


def rows_by_method(
    rows: Sequence[dict[str, Any]], labels: Sequence[str]
) -> tuple[dict[str, dict[str, dict[str, Any]]], list[str], set[str]]:
    """The rows by method label then record id, the `labels` that have rows (in their order), and the
    record ids every one of them has finished (what paired comparisons use)."""
    by_label: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_label.setdefault(row["method"], {})[row["id"]] = row
    present = [label for label in labels if label in by_label]
    common = set.intersection(*(set(by_label[label]) for label in present)) if present else set()
    return by_label, present, common


def summarise(
    rows: Sequence[dict[str, Any]], labels: Sequence[str], header: dict[str, Any]
) -> dict[str, Any]:
    """The `results.json` structure from the record lines `rows` of the method `labels`."""
    by_label, present, common = rows_by_method(rows, labels)
    methods: dict[str, Any] = {}
    for label in present:
        chosen = [row for record_id, row in by_label[label].items() if record_id in common]
        first = chosen[0] if chosen else next(iter(by_label[label].values()))
        methods[label] = {
            "name": first["name"],
            "setting": first["setting"],
            "n_records": len(chosen),
            **{metric: _mean([row.get(metric, math.nan) for row in chosen]) for metric in METRICS},
        }
    ids = sorted(common)
    quality = header.get("quality", "rougeL")
    per_record = {
        label: {
            metric: np.array([by_label[label][i].get(metric, math.nan) for i in ids], dtype=np.float64)
            for metric in ("ver", quality)
        }
        for label in present
    }
    results = {
        **header,
        "n_records": len(common),
        "incomplete": sorted(label for label in present if len(by_label[label]) > len(common)),
        "methods": methods,
        "seconds_per_example": _seconds_per_method(methods),
        "matched": matched_value_errors(methods, per_record, quality),
        "levers": lever_effects(methods, per_record, quality),
        "ratio_gap": {  # measured minus set compression, per press setting
            label: row["compression_ratio"] - row["setting"]["ratio"]
            for label, row in methods.items()
            if "ratio" in row["setting"]
        },
    }
    heads = head_correlations(rows, common)
    if heads:
        results["head_correlation"] = heads
    return results


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _seconds_per_method(methods: dict[str, Any]) -> dict[str, float]:
    """Mean seconds per example (prefill + greedy answer) of each method over its settings."""
    seconds: dict[str, list[float]] = {}
    for row in methods.values():
        seconds.setdefault(row["name"], []).append(row["seconds"])
    return {name: _mean(values) for name, values in seconds.items()}


def rc_curve(setting: dict[str, Any]) -> str:
    """The RCKVCache curve (variant and window) a setting's `c` values lie on, e.g. "sinks=4, w = 16"."""
    return f"{setting.get('variant', PAPER_VARIANT)}, w = {int(setting['window'])}"


def _curves(methods: dict[str, Any], rc: bool) -> dict[str, list[str]]:
    """The labels of every press (`rc=False`) or RCKVCache curve (`rc=True`), by compression."""
    curves: dict[str, list[str]] = {}
    for label, row in methods.items():
        if rc and row["name"] == "rc":
            curves.setdefault(rc_curve(row["setting"]), []).append(label)
        elif not rc and "ratio" in row["setting"]:
            curves.setdefault(row["name"], []).append(label)
    return {
        name: sorted(labels, key=lambda label: methods[label]["compression_ratio"])
        for name, labels in curves.items()
    }


def _at(
    methods: dict[str, Any],
    per_record: dict[str, dict[str, np.ndarray]],
    labels: Sequence[str],
    metric: str,
    target: float,
) -> np.ndarray | None:
    """Per record, `metric` at compression `target` on the curve of `labels` (sorted by compression):
    linear between the two settings whose mean compressions enclose it; None outside them."""
    xs = np.array([methods[label]["compression_ratio"] for label in labels])
    if len(xs) < 2 or not xs[0] <= target <= xs[-1]:
        return None
    k = min(int(np.searchsorted(xs, target, side="right")) - 1, len(xs) - 2)
    weight = (target - xs[k]) / (xs[k + 1] - xs[k]) if xs[k + 1] > xs[k] else 0.0
    return (1 - weight) * per_record[labels[k]][metric] + weight * per_record[labels[k + 1]][metric]


def matched_value_errors(
    methods: dict[str, Any], per_record: dict[str, dict[str, np.ndarray]], quality: str
) -> dict[str, Any]:
    """For each RCKVCache setting, each press's VER interpolated at the compression RCKVCache reached
    (None outside the press's measured range), whether RCKVCache's VER is below all of them, and the
    paired differences (RCKVCache minus press, with 95% bootstrap intervals over records) of VER and of
    the task's answer quality."""
    presses = _curves(methods, rc=False)
    matched = {}
    for label, row in methods.items():
        if row["name"] != "rc":
            continue
        ratio = row["compression_ratio"]
        press_ver: dict[str, float | None] = {}
        differences: dict[str, dict[str, tuple[float, float, float]]] = {}
        for name, labels in presses.items():
            ver = _at(methods, per_record, labels, "ver", ratio)
            press_ver[name] = None if ver is None else float(ver.mean())
            if ver is not None:
                answers = _at(methods, per_record, labels, quality, ratio)
                assert answers is not None
                differences[name] = {
                    "ver": paired_mean_difference(per_record[label]["ver"], ver),
                    quality: paired_mean_difference(per_record[label][quality], answers),
                }
        compared = [v for v in press_ver.values() if v is not None]
        matched[label] = {
            "compression_ratio": ratio,
            "rc_ver": row["ver"],
            "press_ver": press_ver,
            "rc_lowest": row["ver"] < min(compared) if compared else None,  # None: no press measured there
            "difference": differences,
        }
    return matched


def lever_effects(
    methods: dict[str, Any], per_record: dict[str, dict[str, np.ndarray]], quality: str
) -> dict[str, Any]:
    """Each RCKVCache curve's VER and answer quality at [`LEVER_RATIOS`][rcattr.eval.kv.results.LEVER_RATIOS], interpolated over its `c`
    values record by record, and its paired VER difference to the default variant at the default window
    (minus: the variant's VER is lower), with a 95% bootstrap interval over records."""
    curves = _curves(methods, rc=True)
    baseline = f"{PAPER_VARIANT}, w = {BASELINE_WINDOW}"
    if baseline not in curves:
        baseline = next((name for name in curves if name.startswith(PAPER_VARIANT + ",")), "")
    effects: dict[str, Any] = {}
    for name, labels in curves.items():
        cells: dict[str, Any] = {}
        for target in LEVER_RATIOS:
            ver = _at(methods, per_record, labels, "ver", target)
            if ver is None:
                cells[f"{target:g}"] = None
                continue
            answers = _at(methods, per_record, labels, quality, target)
            assert answers is not None
            base = _at(methods, per_record, curves[baseline], "ver", target) if baseline else None
            cells[f"{target:g}"] = {
                "ver": float(ver.mean()),
                quality: float(answers.mean()),
                "ver_difference": None
                if base is None or name == baseline
                else paired_mean_difference(ver, base),
            }
        effects[name] = {"baseline": baseline, "at": cells}
    return effects


def head_correlations(rows: Sequence[dict[str, Any]], common: set[str]) -> dict[str, Any]:
    """Per RCKVCache setting, Spearman's rho between a head's compression and its RC score, over every
    (record, layer, key head) of the records in `common`."""
    pooled: dict[str, tuple[list[float], list[float]]] = {}
    for row in rows:
        if row.get("head_compression") and row["id"] in common:
            scores, compression = pooled.setdefault(row["method"], ([], []))
            scores += [s for layer in row["head_score"] for s in layer]
            compression += [c for layer in row["head_compression"] for c in layer]
    out = {}
    for label, (scores, compression) in pooled.items():
        rho = spearmanr(scores, compression).statistic if len(set(compression)) > 1 else float("nan")
        out[label] = {"spearman": float(rho), "n_heads": len(scores)}
    return out
