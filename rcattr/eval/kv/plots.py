"""The KV benchmark's figures: VER and answer quality against compression (paper Fig. 3), and per-head
compression against per-head RC score (paper Fig. 4a)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rcattr.eval.kv.results import rc_curve
from rcattr.eval.kv.tables import quality_metric

FIG4_LABEL = "rc/c=1/w=16"  # the head plot's default: the paper's default c and window


def plot_frontiers(results: dict[str, Any], path: str | Path) -> Path:
    """VER and the task's answer quality against the measured compression: a line per press, RCKVCache
    points per `c`."""
    from matplotlib.figure import Figure  # not pyplot: no backend switch, no global figure state

    quality = quality_metric(results)
    figure = Figure(figsize=(12.5, 4.4))
    axes = figure.subplots(1, 2)
    methods = results["methods"]
    for axis, metric, title in (
        (axes[0], "ver", "value error rate, last layer (lower is better; log scale)"),
        (axes[1], quality, "ROUGE-L F1" if quality == "rougeL" else "answer match (share of answers)"),
    ):
        for name in dict.fromkeys(row["name"] for row in methods.values() if "ratio" in row["setting"]):
            points = sorted(
                (row["compression_ratio"], row[metric]) for row in methods.values() if row["name"] == name
            )
            axis.plot(*zip(*points, strict=True), "-o", markersize=3, label=name, alpha=0.8)
        rc = [row for row in methods.values() if row["name"] == "rc"]
        curves = sorted({rc_curve(row["setting"]) for row in rc})
        for curve, marker in zip(curves, "*sDP^v<>ph8", strict=False):
            curve_rows = [row for row in rc if rc_curve(row["setting"]) == curve]
            axis.scatter(
                [r["compression_ratio"] for r in curve_rows],
                [r[metric] for r in curve_rows],
                marker=marker,
                s=60,
                color="black" if len(curves) == 1 else None,
                zorder=3,
                label=f"RCKVCache, {curve}",
            )
            for r in curve_rows:
                axis.annotate(
                    f"c={r['setting']['c']:g}" if "c" in r["setting"] else f"r={r['setting']['ratio']:g}",
                    (r["compression_ratio"], r[metric]),
                    fontsize=6,
                    xytext=(3, 3),
                    textcoords="offset points",
                )
        if metric == quality and "full" in methods:
            axis.axhline(methods["full"][quality], color="gray", linestyle="--", label="full cache")
        axis.set_xlabel("compression ratio (measured)")
        axis.set_title(title, fontsize=10)
        axis.grid(alpha=0.3)
    axes[0].set_yscale("log")  # the presses' VER spans an order of magnitude
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    figure.suptitle(
        f"{results['config']['dataset']}: {results['n_records']} records, {results['model']}", fontsize=10
    )
    figure.tight_layout()
    figure.savefig(path, dpi=150, bbox_inches="tight")
    return Path(path)


def plot_head_compression(results: dict[str, Any], rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Per (layer, key head), mean compression against mean RC score over the records (paper Fig. 4a)."""
    from matplotlib.figure import Figure

    correlations = results["head_correlation"]
    label = FIG4_LABEL if FIG4_LABEL in correlations else next(iter(correlations))
    chosen = [row for row in rows if row["method"] == label and row.get("head_compression")]
    score = np.mean([row["head_score"] for row in chosen], axis=0)  # [layers, Hkv]
    compression = np.mean([row["head_compression"] for row in chosen], axis=0)
    figure = Figure(figsize=(5.5, 4.2))
    axis = figure.subplots()
    layers = np.broadcast_to(np.arange(score.shape[0])[:, None], score.shape)
    points = axis.scatter(score.ravel(), compression.ravel(), c=layers.ravel(), cmap="viridis", s=18)
    figure.colorbar(points, ax=axis, label="layer")
    axis.set_xlabel("head's mean RC score E[Z] (context vs window)")
    axis.set_ylabel("share of the context the head evicts")
    axis.set_title(
        f"{label}: Spearman ρ = {correlations[label]['spearman']:.2f} over "
        f"{correlations[label]['n_heads']} (record, head) pairs",
        fontsize=9,
    )
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=150)
    return Path(path)
