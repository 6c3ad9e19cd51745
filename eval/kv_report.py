"""The KV benchmark's results: aggregation, the Markdown table, and the paper's plots.

* :func:`summarise`: per method label, the means over the records every label has (so every row is
  measured on the same records); RCKVCache's VER and answer quality against each press's at the same
  compression (linear interpolation between the press's measured points, record by record), with paired
  bootstrap intervals of the differences; each RCKVCache variant's VER at 50% and 70% compression
  (interpolated over its ``c`` values) against the default's; the rank correlation of per-head
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

from rcattr.eval.kv_methods import PAPER_VARIANT
from rcattr.eval.metrics import paired_mean_difference

METRICS = ("ver", "rouge1", "rougeL", "match", "compression_ratio", "bytes_ratio", "seconds")
QUALITY_NAMES = {"rougeL": "ROUGE-L", "match": "answer match"}
FIG4_LABEL = "rc/c=1/w=16"  # the head plot's default: the paper's default c and window
LEVER_RATIOS = (0.5, 0.7)  # where the RCKVCache variants are compared (interpolated over c)
BASELINE_WINDOW = 16  # RCKVCache's default window: the variants are compared with it


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
    """The RCKVCache curve (variant and window) a setting's ``c`` values lie on, e.g. "sinks=4, w = 16"."""
    return f"{setting.get('variant', PAPER_VARIANT)}, w = {int(setting['window'])}"


def _curves(methods: dict[str, Any], rc: bool) -> dict[str, list[str]]:
    """The labels of every press (``rc=False``) or RCKVCache curve (``rc=True``), by compression."""
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
    """Per record, ``metric`` at compression ``target`` on the curve of ``labels`` (sorted by compression):
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
    """Each RCKVCache curve's VER and answer quality at :data:`LEVER_RATIOS`, interpolated over its ``c``
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
        variant = f", {setting['variant']}" if "variant" in setting else ""
        return f"c = {setting['c']:g}, w = {int(setting['window'])}{variant}"
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
        curves: dict[str, dict[float, dict[str, Any]]] = {}
        for row in sorted(rc, key=lambda row: (row["setting"].get("variant", ""), row["setting"]["window"])):
            variant = row["setting"].get("variant")
            key = str(int(row["setting"]["window"])) + (f", {variant}" if variant else "")
            curves.setdefault(key, {})[row["setting"]["c"]] = row
        lines += _grid(
            f"RCKVCache: compression reached · VER ↓ · {name} at each c",
            "window",
            {f"c = {c:g}": c for c in sorted({row["setting"]["c"] for row in rc})},
            curves,
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
    lines += _matched_lines(results)
    lines += _lever_lines(results)
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


def _difference(value: tuple[float, float, float] | None, spec: str = "+.3f") -> str:
    """A paired difference and its interval, e.g. "-0.021 [-0.030, -0.012]"."""
    if value is None or math.isnan(value[0]):
        return "—"
    return f"{value[0]:{spec}} [{value[1]:{spec}}, {value[2]:{spec}}]"


def _matched_lines(results: dict[str, Any]) -> list[str]:
    """VER at RCKVCache's compression per press, and the paired differences with their intervals."""
    matched = results["matched"]
    if not matched:
        return []
    quality = _quality(results)
    presses = sorted({name for row in matched.values() for name in row["press_ver"]})
    lines = [
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
        differences = [r["difference"][name]["ver"] for r in matched.values() if name in r["difference"]]
        lower = sum(d[0] < 0 for d in differences)
        significant = sum(d[2] < 0 for d in differences)
        wins.append(f"{lower} of {len(differences)} ({significant} with the interval below 0)")
    lines.append("| RC VER lower in | | | " + " | ".join(wins) + " | |")
    if not any(row["difference"] for row in matched.values()):
        return lines
    lines += [
        "",
        f"RCKVCache minus press at RCKVCache's compression, paired over the {results['n_records']} records "
        f"(95% bootstrap interval): VER (below 0: RCKVCache closer to the full cache) · "
        f"{QUALITY_NAMES[quality]} (above 0: RCKVCache better).",
        "",
        "| RCKVCache | compression | " + " | ".join(presses) + " |",
        "|---|---:|" + "---:|" * len(presses),
    ]
    for label, row in matched.items():
        cells = [
            " · ".join(_difference(row["difference"][name][metric]) for metric in ("ver", quality))
            if name in row["difference"]
            else "—"
            for name in presses
        ]
        lines.append(f"| {label} | {_format(row['compression_ratio'], '.1%')} | " + " | ".join(cells) + " |")
    return lines


def _lever_lines(results: dict[str, Any]) -> list[str]:
    """Each RCKVCache variant and window at 50% and 70% compression against the default."""
    levers = results.get("levers") or {}
    if len(levers) < 2:
        return []
    quality = _quality(results)
    baseline = next(iter(levers.values()))["baseline"]
    header = " | ".join(
        f"VER @ {float(t):.0%} | Δ VER vs {baseline} | {QUALITY_NAMES[quality]} @ {float(t):.0%}"
        for t in map(str, LEVER_RATIOS)
    )
    lines = [
        "",
        "### RCKVCache variants at matched compression (interpolated over c; Δ paired over records, 95% interval)",
        "",
        f"| variant, window | {header} |",
        "|---|" + "---:|---:|---:|" * len(LEVER_RATIOS),
    ]
    for name, lever in levers.items():
        cells = []
        for target in LEVER_RATIOS:
            cell = lever["at"][f"{target:g}"]
            cells += (
                ["—", "—", "—"]
                if cell is None
                else [
                    _format(cell["ver"], ".4f"),
                    _difference(cell["ver_difference"]),
                    _format(cell[quality], ".3f"),
                ]
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def plot_frontiers(results: dict[str, Any], path: str | Path) -> Path:
    """VER and the task's answer quality against the measured compression: a line per press, RCKVCache
    points per ``c``."""
    from matplotlib.figure import Figure  # not pyplot: no backend switch, no global figure state

    quality = _quality(results)
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
