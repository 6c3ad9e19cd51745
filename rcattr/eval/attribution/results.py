"""The attribution benchmark's `results.json`: every method's lines on disk aggregated into table rows,
with bootstrap intervals and paired differences to the default RCAttributor and to the paper's recipe."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rcattr.eval.attribution.method import AttributionMethod, Row
from rcattr.eval.attribution.recipes import DEFAULT, PAPER, ablation
from rcattr.eval.common.metrics import (
    accuracy,
    bootstrap_interval,
    mean_interval,
    paired_difference,
    paired_mean_difference,
)

Lines = dict[str, Row]  # a method's lines by record id


def summarise(
    header: dict[str, Any],
    methods: Mapping[str, AttributionMethod[Any]],
    done: Mapping[str, Lines],
    peaks: Mapping[str, float],
    faithful: Lines,
) -> dict[str, Any]:
    """The `results.json` structure: `header`, then a table row per row each method's lines `done`
    give ([`table`][rcattr.eval.attribution.method.AttributionMethod.table]) with its intervals, the methods'
    own results, and the faithfulness metrics of the lines `faithful`; `peaks`: MiB per method."""
    table: dict[str, Any] = {}
    hits: dict[str, dict[str, list[bool]]] = {}  # table row -> record id -> source hits
    extra: dict[str, Any] = {}
    for name, method in methods.items():  # every method with lines on disk, run now or before
        lines = done.get(name, {})
        if not lines:
            continue
        timing = {
            "n_records": len(lines),
            "seconds_per_example": sum(row["seconds"] for row in lines.values()) / len(lines),
            "peak_memory_mib": peaks.get(name),
        }
        origin = {"from": name} if method.shared_pass else {}
        for label, rows in method.table(lines).items():
            table[label] = {**_summary(list(rows.values())), **timing, **origin}
            hits[label] = {key: row["source"] for key, row in rows.items()}
        extra.update(method.results(lines))
    reference = _reference(hits, "rc", DEFAULT)
    paper = _reference(hits, "rc_paper", PAPER)
    for name, row in table.items():
        row["interval"] = bootstrap_interval(list(hits[name].values()))
        if reference is not None:
            row.update(_against(hits[name], hits[reference]))
        if paper is not None:
            row["difference_to_paper"], *bounds = _paired(hits[name], hits[paper])
            row["difference_to_paper_interval"] = tuple(bounds)
    results = {**header, "reference": reference, "paper_reference": paper, "methods": table, **extra}
    if faithful:
        results["faithfulness"] = _faithfulness_summary(
            [row["metrics"] for row in faithful.values()], reference
        )
    return results


def chunk_scores(
    record_id: str, methods: Mapping[str, AttributionMethod[Any]], done: Mapping[str, Lines]
) -> dict[str, torch.Tensor]:
    """Every table row's chunk scores `[n_chunks]` of one record, by row name (those that have the record)."""
    scores = {}
    for name, method in methods.items():
        for label, rows in method.table(done.get(name, {})).items():
            if record_id in rows:
                scores[label] = torch.tensor(rows[record_id]["chunk_scores"])
    return scores


def _reference(hits: dict[str, dict[str, list[bool]]], method: str, lever: str) -> str | None:
    """The row a method is compared with: `method` run alone or its recipe row in the sweep,
    whichever covers more records (the one run alone on a tie). A reference run on a subset
    (`--method-limit rc_paper=20`) would pair every comparison on that subset only."""
    recipe = next(recipe.label for recipe in ablation() if recipe.lever == lever)
    present = [name for name in (method, recipe) if name in hits]
    return max(present, key=lambda name: len(hits[name]), default=None)


def _paired(hits: dict[str, list[bool]], reference: dict[str, list[bool]]) -> tuple[float, float, float]:
    """`(difference, low, high)` of `hits` against `reference` on the records both have."""
    shared = [key for key in hits if key in reference]
    return paired_difference([hits[key] for key in shared], [reference[key] for key in shared])


def _against(hits: dict[str, list[bool]], reference: dict[str, list[bool]]) -> dict[str, Any]:
    """The reference's accuracy on the records `hits` covers, and the paired difference to it."""
    theirs = [reference[key] for key in hits if key in reference]
    difference, low, high = _paired(hits, reference)
    return {
        "rc_default_same_records": accuracy([hit for row in theirs for hit in row])[0],
        "difference_to_default": difference,
        "difference_to_default_interval": (low, high),
    }


def _summary(rows: Sequence[Row]) -> dict[str, Any]:
    score, n_spans = accuracy([hit for row in rows for hit in row["source"]])
    location, n_located = accuracy([hit for row in rows for hit in row["location"]])
    summary: dict[str, Any] = {
        "accuracy": score,
        "n_spans": n_spans,
        "location_accuracy": location,
        "n_located": n_located,
    }
    heads = [row["heads"] for row in rows if "heads" in row]
    if heads:  # a recipe's heads per record: its mean, and the fewest any record got
        summary["heads"] = {"mean": sum(heads) / len(heads), "min": min(heads), "max": max(heads)}
    return summary


def _faithfulness_summary(
    rows: Sequence[dict[str, dict[str, float]]], reference: str | None
) -> dict[str, dict[str, Any]]:
    """Per method and metric, over the records where it is defined (nan left out): the mean with its bootstrap
    interval (`METRIC_interval`) and, against `reference` on the records both have, the paired difference
    (`METRIC_minus_reference` and its `_interval`)."""
    out: dict[str, dict[str, Any]] = {}
    for method in dict.fromkeys(name for row in rows for name in row):
        present = [row for row in rows if method in row]
        summary: dict[str, Any] = {"n_records": len(present)}
        for metric in dict.fromkeys(metric for row in present for metric in row[method]):
            values = [row[method][metric] for row in present if _defined(row[method].get(metric))]
            if not values:
                continue
            summary[metric], *bounds = mean_interval(values)
            summary[f"{metric}_interval"] = tuple(bounds)
            paired = [
                (row[method][metric], row[reference][metric])
                for row in present
                if reference in row
                and _defined(row[method].get(metric))
                and _defined(row[reference].get(metric))
            ]
            if reference is not None and method != reference and paired:
                mine, theirs = zip(*paired, strict=True)
                summary[f"{metric}_minus_reference"], *bounds = paired_mean_difference(mine, theirs)
                summary[f"{metric}_minus_reference_interval"] = tuple(bounds)
        out[method] = summary
    return out


def _defined(value: float | None) -> bool:
    return value is not None and not math.isnan(value)
