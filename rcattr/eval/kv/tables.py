"""The KV benchmark's `results.md`: the summary grids, every method and setting, VER at matched
compression against each press, the RCKVCache variants, and the notes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rcattr.eval.kv.results import LEVER_RATIOS

QUALITY_NAMES = {"rougeL": "ROUGE-L", "match": "answer match"}


def _format(value: float | None, spec: str) -> str:
    return "—" if value is None or math.isnan(value) else format(value, spec)


def _setting(row: dict[str, Any]) -> str:
    setting = row["setting"]
    if not setting:
        return "—"
    cut = f"c = {setting['c']:g}" if "c" in setting else f"ratio {setting['ratio']:g}"
    if "window" not in setting:  # a press
        return cut
    variant = f", {setting['variant']}" if "variant" in setting else ""
    return f"{cut}, w = {int(setting['window'])}{variant}"


def quality_metric(results: dict[str, Any]) -> str:
    """The task's answer-quality metric (runs from before the needle task have ROUGE-L)."""
    return results.get("quality", "rougeL")


def summary_tables(results: dict[str, Any]) -> list[str]:
    """VER · quality per press and ratio, and compression · VER · quality per RCKVCache window and c (and per
    set share, `--rc-ratios`)."""
    quality = quality_metric(results)
    name = QUALITY_NAMES[quality]
    methods = results["methods"].values()
    presses = [row for row in methods if "ratio" in row["setting"] and row["name"] != "rc"]
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
    for knob, label, symbol in (("c", "c", "c"), ("ratio", "set share", "r")):  # thresholds, then ratio=r
        cut = [row for row in rc if knob in row["setting"]]
        if not cut:
            continue
        curves: dict[str, dict[float, dict[str, Any]]] = {}
        for row in sorted(cut, key=lambda row: (row["setting"].get("variant", ""), row["setting"]["window"])):
            variant = row["setting"].get("variant")
            key = str(int(row["setting"]["window"])) + (f", {variant}" if variant else "")
            curves.setdefault(key, {})[row["setting"][knob]] = row
        lines += _grid(
            f"RCKVCache: compression reached · VER ↓ · {name} at each {label}",
            "window",
            {f"{symbol} = {value:g}": value for value in sorted({r["setting"][knob] for r in cut})},
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
    """A Markdown table: one row per `rows` key, one column per `columns` value, each cell the
    `metrics` of the method row found there, joined by " · "."""

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
    quality = quality_metric(results)
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
    quality = quality_metric(results)
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
