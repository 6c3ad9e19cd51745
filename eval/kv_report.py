"""The KV benchmark's results: aggregation, the Markdown table, and the paper's plots.

* :func:`summarise`: per method label, the means over the records every label has (so every row is
  measured on the same records); RCKVCache's VER against each press's at the same compression
  (linear interpolation between the press's measured points); the rank correlation of per-head
  compression with the per-head RC score.
* :func:`plot_frontiers`: VER and the task's answer quality (ROUGE-L, or answer match on the needle task)
  against compression, one line per press, RCKVCache as points per ``c`` (paper Fig. 3);
  :func:`plot_head_compression`: per-head compression against per-head RC score (paper Fig. 4a).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

METRICS = ("ver", "rouge1", "rougeL", "match", "compression_ratio", "bytes_ratio", "seconds")
QUALITY_NAMES = {"rougeL": "ROUGE-L", "match": "answer match"}
FIG4_LABEL = "rc/c=1/w=16"  # the head plot's default: the paper's default c and window


def summarise(
    rows: Sequence[dict[str, Any]], labels: Sequence[str], header: dict[str, Any]
) -> dict[str, Any]:
    """The ``results.json`` structure from the record lines ``rows`` of the method ``labels``."""
    by_label: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_label.setdefault(row["method"], {})[row["id"]] = row
    present = [label for label in labels if label in by_label]
    common = set.intersection(*(set(by_label[label]) for label in present)) if present else set()
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
    results = {
        **header,
        "n_records": len(common),
        "incomplete": sorted(label for label in present if len(by_label[label]) > len(common)),
        "methods": methods,
        "seconds_per_example": _seconds_per_method(methods),
        "matched": matched_value_errors(methods),
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


def _press_curves(methods: dict[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per press, its measured (compression, VER) points sorted by compression."""
    points: dict[str, list[tuple[float, float]]] = {}
    for row in methods.values():
        if "ratio" in row["setting"]:
            points.setdefault(row["name"], []).append((row["compression_ratio"], row["ver"]))
    return {name: tuple(np.array(v) for v in zip(*sorted(p), strict=True)) for name, p in points.items()}  # type: ignore[misc]


def matched_value_errors(methods: dict[str, Any]) -> dict[str, Any]:
    """For each RCKVCache setting, each press's VER interpolated at the compression RCKVCache reached
    (None outside the press's measured range), and whether RCKVCache's VER is below all of them."""
    curves = _press_curves(methods)
    matched = {}
    for label, row in methods.items():
        if row["name"] != "rc":
            continue
        ratio = row["compression_ratio"]
        presses = {
            name: float(np.interp(ratio, x, y)) if len(x) > 1 and x[0] <= ratio <= x[-1] else None
            for name, (x, y) in curves.items()
        }
        compared = [v for v in presses.values() if v is not None]
        matched[label] = {
            "compression_ratio": ratio,
            "rc_ver": row["ver"],
            "press_ver": presses,
            "rc_lowest": row["ver"] < min(compared) if compared else None,  # None: no press measured there
        }
    return matched


def head_correlations(rows: Sequence[dict[str, Any]], common: set[str]) -> dict[str, Any]:
    """Per RCKVCache setting, Spearman's rho between a head's compression and its RC score, over every
    (record, layer, key head) of the records in ``common``."""
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


def _format(value: float | None, spec: str) -> str:
    return "—" if value is None or math.isnan(value) else format(value, spec)


def _setting(row: dict[str, Any]) -> str:
    setting = row["setting"]
    if "c" in setting:
        return f"c = {setting['c']:g}, w = {int(setting['window'])}"
    return f"ratio {setting['ratio']:g}" if setting else "—"


def _quality(results: dict[str, Any]) -> str:
    """The task's answer-quality metric (runs from before the needle task have ROUGE-L)."""
    return results.get("quality", "rougeL")


def summary_tables(results: dict[str, Any]) -> list[str]:
    """VER · quality per press and ratio, and compression · VER · quality per RCKVCache window and c."""
    quality = _quality(results)
    name = QUALITY_NAMES[quality]
    methods = results["methods"].values()
    presses = [row for row in methods if "ratio" in row["setting"]]
    rc = [row for row in methods if row["name"] == "rc"]
    lines = []
    if "full" in results["methods"]:
        full = results["methods"]["full"]
        lines += [
            "",
            f"Full cache: ROUGE-1 {full['rouge1']:.3f}, ROUGE-L {full['rougeL']:.3f}, answer match "
            f"{_format(full['match'], '.3f')}.",
        ]
    seconds = ", ".join(f"{name} {value:.2f}" for name, value in results["seconds_per_example"].items())
    lines += ["", f"Seconds per example (prefill + greedy answer, mean over settings): {seconds}."]
    if results["ratio_gap"]:
        worst = max(results["ratio_gap"].items(), key=lambda item: abs(item[1]))
        lines.append(
            f"Measured compression of the presses minus their set ratio: at most {abs(worst[1]):.1%} "
            f"({worst[0]})."
        )
    if presses:
        ratios = sorted({row["setting"]["ratio"] for row in presses})
        lines += _grid(
            f"kvpress presses: VER ↓ · {name} at each set ratio",
            "press",
            {f"{r:g}": r for r in ratios},
            {
                name: {row["setting"]["ratio"]: row for row in presses if row["name"] == name}
                for name in dict.fromkeys(row["name"] for row in presses)
            },
            ("ver", quality),
        )
    if rc:
        windows = sorted({int(row["setting"]["window"]) for row in rc})
        lines += _grid(
            f"RCKVCache: compression reached · VER ↓ · {name} at each c",
            "window",
            {f"c = {c:g}": c for c in sorted({row["setting"]["c"] for row in rc})},
            {
                str(w): {row["setting"]["c"]: row for row in rc if int(row["setting"]["window"]) == w}
                for w in windows
            },
            ("compression_ratio", "ver", quality),
        )
    return lines


def _grid(
    title: str,
    corner: str,
    columns: dict[str, float],
    rows: dict[str, dict[float, dict[str, Any]]],
    metrics: Sequence[str],
) -> list[str]:
    """A Markdown table: one row per ``rows`` key, one column per ``columns`` value, each cell the
    ``metrics`` of the method row found there, joined by " · "."""

    def cell(row: dict[str, Any] | None) -> str:
        if row is None:
            return "—"
        return " · ".join(_format(row[m], ".0%" if m == "compression_ratio" else ".3f") for m in metrics)

    return [
        "",
        f"### {title}",
        "",
        f"| {corner} | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
        *(
            f"| {label} | " + " | ".join(cell(cells.get(key)) for key in columns.values()) + " |"
            for label, cells in rows.items()
        ),
    ]


def markdown_table(results: dict[str, Any]) -> str:
    """The results as Markdown: one row per method and setting, the matched-VER table, and the notes."""
    config = results["config"]
    lines = [
        f"## KV compression on {config['dataset']}: {results['n_records']} records",
        "",
        f"Model: `{results['model']}`. Protocol: {results['protocol']}. Question part: "
        f'"{results["question_format"]}". Greedy answers of at most {results["max_new_tokens"]} tokens.',
        *summary_tables(results),
        "",
        "### Every method and setting",
        "",
        "| method | setting | compression | bytes held | VER ↓ | ROUGE-1 | ROUGE-L | answer match | s / example |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["methods"].values():
        lines.append(
            f"| {row['name']} | {_setting(row)} | {_format(row['compression_ratio'], '.1%')} | "
            f"{_format(row['bytes_ratio'], '.3f')} | {_format(row['ver'], '.4f')} | "
            f"{_format(row['rouge1'], '.3f')} | {_format(row['rougeL'], '.3f')} | {_format(row['match'], '.3f')} | "
            f"{_format(row['seconds'], '.2f')} |"
        )
    lines += [
        "",
        "Compression: context entries (layers × key heads × tokens) evicted, or masked out of attention "
        "(AdaKV), measured on the cache after prefill. Bytes held: the cache's keys and values (and "
        "RCKVCache's slot positions) against the full cache's. s / example: prefill + greedy answer.",
    ]
    matched = results["matched"]
    if matched:
        presses = sorted({name for row in matched.values() for name in row["press_ver"]})
        lines += [
            "",
            "### VER at RCKVCache's compression (presses interpolated between their measured ratios)",
            "",
            "| RCKVCache | compression | RC VER | " + " | ".join(presses) + " | RC lowest |",
            "|---|---:|---:|" + "---:|" * len(presses) + "---|",
        ]
        for label, row in matched.items():
            cells = [_format(row["press_ver"].get(name), ".4f") for name in presses]
            lines.append(
                f"| {label} | {_format(row['compression_ratio'], '.1%')} | {_format(row['rc_ver'], '.4f')} | "
                + " | ".join(cells)
                + f" | {'—' if row['rc_lowest'] is None else 'yes' if row['rc_lowest'] else 'no'} |"
            )
        wins = []
        for name in presses:
            pairs = [
                (r["rc_ver"], r["press_ver"][name])
                for r in matched.values()
                if r["press_ver"].get(name) is not None
            ]
            wins.append(f"{sum(rc < press for rc, press in pairs)} of {len(pairs)}")
        lines.append("| RC VER lower in | | | " + " | ".join(wins) + " | |")
    if "head_correlation" in results:
        lines += [
            "",
            "Per-head compression against per-head RC score (Spearman's ρ over layers × key heads × records):",
        ]
        lines += [
            f"- {label}: ρ = {_format(row['spearman'], '.3f')} ({row['n_heads']} heads)"
            for label, row in results["head_correlation"].items()
        ]
    if results["incomplete"]:
        lines += [
            "",
            f"Rows on the {results['n_records']} records every method has; more on disk for: "
            + ", ".join(results["incomplete"])
            + ".",
        ]
    return "\n".join(lines) + "\n"


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_frontiers(results: dict[str, Any], path: str | Path) -> Path:
    """VER and the task's answer quality against the measured compression: a line per press, RCKVCache
    points per ``c``."""
    plt = _pyplot()
    quality = _quality(results)
    figure, axes = plt.subplots(1, 2, figsize=(12.5, 4.4))
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
        for window, marker in zip(
            sorted({int(row["setting"]["window"]) for row in rc}), "*sDP^v", strict=False
        ):
            window_rows = [row for row in rc if int(row["setting"]["window"]) == window]
            axis.scatter(
                [r["compression_ratio"] for r in window_rows],
                [r[metric] for r in window_rows],
                marker=marker,
                s=60,
                color="black",
                zorder=3,
                label=f"RCKVCache, w = {window}",
            )
            for r in window_rows:
                axis.annotate(
                    f"c={r['setting']['c']:g}",
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
    plt.close(figure)
    return Path(path)


def plot_head_compression(results: dict[str, Any], rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Per (layer, key head), mean compression against mean RC score over the records (paper Fig. 4a)."""
    plt = _pyplot()
    correlations = results["head_correlation"]
    label = FIG4_LABEL if FIG4_LABEL in correlations else next(iter(correlations))
    chosen = [row for row in rows if row["method"] == label and row.get("head_compression")]
    score = np.mean([row["head_score"] for row in chosen], axis=0)  # [layers, Hkv]
    compression = np.mean([row["head_compression"] for row in chosen], axis=0)
    figure, axis = plt.subplots(figsize=(5.5, 4.2))
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
    plt.close(figure)
    return Path(path)
