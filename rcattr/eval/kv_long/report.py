"""The long-generation benchmark's report: per method the means over the records every method finished, with
95% bootstrap intervals (records resampled), each method's KL minus decode-time RCKVCache's with a paired
interval, and the plot of bytes held against tokens generated."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rcattr.eval.common.metrics import paired_mean_difference
from rcattr.eval.kv.results import rows_by_method

REFERENCE = "rc"  # every method's KL is compared with decode-time RCKVCache's
INTERVAL_METRICS = ("kl", "top1", "quality")
MEAN_METRICS = ("peak_bytes", "full_peak_bytes", "tokens_per_second", "answer_tokens", "reference_tokens")
MIB = 2**20
BYTES_EVERY = 8  # the bytes held are stored every this many steps, for the plot


def _interval(values: np.ndarray) -> dict[str, float]:
    mean, low, high = paired_mean_difference(values, np.zeros_like(values))
    return {"mean": mean, "low": low, "high": high}


def summarise_long(
    rows: Sequence[dict[str, Any]], labels: Sequence[str], header: dict[str, Any]
) -> dict[str, Any]:
    """The `results.json` structure from the record lines `rows` of the method `labels`."""
    by_label, present, common_ids = rows_by_method(rows, labels)
    common = sorted(common_ids)
    values = {
        label: {
            metric: np.array([by_label[label][i][metric] for i in common], dtype=np.float64)
            for metric in (*INTERVAL_METRICS, *MEAN_METRICS)
        }
        for label in present
    }
    methods: dict[str, Any] = {}
    for label in present:
        own = values[label]
        summary: dict[str, Any] = {metric: _interval(own[metric]) for metric in INTERVAL_METRICS}
        summary.update({metric: float(own[metric].mean()) for metric in MEAN_METRICS})
        summary["peak_ratio"] = float((own["peak_bytes"] / own["full_peak_bytes"]).mean())
        seconds = own["answer_tokens"] / own["tokens_per_second"]  # over all answers: a 1-token one weighs 1
        summary["tokens_per_second"] = float(own["answer_tokens"].sum() / seconds.sum())
        if REFERENCE in values and label != REFERENCE:
            difference, low, high = paired_mean_difference(own["kl"], values[REFERENCE]["kl"])
            summary["kl_minus_rc"] = {"mean": difference, "low": low, "high": high}
        summary["nbytes"] = _mean_course([by_label[label][i]["nbytes"] for i in common])
        methods[label] = summary
    return {**header, "n_records": len(common), "methods": methods}


def _mean_course(courses: Sequence[Sequence[int]]) -> list[float]:
    """The mean over records of the bytes held at each sampled step (over the records that reach it)."""
    longest = max((len(course) for course in courses), default=0)
    return [float(np.mean([c[step] for c in courses if len(c) > step])) for step in range(longest)]


def _with_interval(summary: dict[str, float], spec: str) -> str:
    return f"{summary['mean']:{spec}} [{summary['low']:{spec}}, {summary['high']:{spec}}]"


def table_long(results: dict[str, Any]) -> str:
    """`results.md`: one row per method."""
    quality = "ROUGE-L" if results["quality"] == "rougeL" else "needle match"
    lines = [
        f"# Long generation: {results['config']['task']} ({results['n_records']} records, {results['model']})",
        "",
        f"Budget: {results['budget']}; up to {results['max_new_tokens']} new tokens. Means over the records "
        "with 95% bootstrap intervals; KL and top-1 teacher-forced on the full cache's greedy answer; "
        "Δ KL paired against decode-time RCKVCache (rc).",
        "",
        f"| method | KL (nats) ↓ | Δ KL vs rc | top-1 agreement | {quality} | peak KV MiB (× full) | tokens/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, row in results["methods"].items():
        delta = _with_interval(row["kl_minus_rc"], "+.4f") if "kl_minus_rc" in row else "—"
        lines.append(
            f"| {label} | {_with_interval(row['kl'], '.4f')} | {delta} | {_with_interval(row['top1'], '.3f')} | "
            f"{_with_interval(row['quality'], '.3f')} | {row['peak_bytes'] / MIB:.1f} ({row['peak_ratio']:.2f}) | "
            f"{row['tokens_per_second']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot_bytes_held(results: dict[str, Any], path: str | Path, every: int = BYTES_EVERY) -> Path:
    """Mean KV bytes held against tokens fed after the question (the prefix's, then the answer's), one line
    per method (`every`: the sampling step of the stored courses)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 4.2))
    axis = figure.subplots()
    for label, row in results["methods"].items():
        course = np.array(row["nbytes"]) / MIB
        style = "-" if label.startswith("rc") or label == "full" else ":"
        axis.plot(
            np.arange(len(course)) * every,
            course,
            style,
            label=label,
            linewidth=2 if label == REFERENCE else 1.2,
        )
    axis.set_xlabel("tokens fed after the question")
    axis.set_ylabel("KV cache held (MiB, mean over records)")
    axis.set_title(f"{results['config']['task']}: {results['budget']}", fontsize=9)
    axis.legend(fontsize=7)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    return path
