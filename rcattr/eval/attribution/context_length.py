"""Accuracy against context length and gold position: long-context runs beside the short run of their file.

    python -m rcattr.eval.attribution.context_length --short runs/quotesum \\
        --runs runs/quotesum_8k_middle runs/quotesum_8k_start ... --out docs/records/long_context/quotesum

Each long run (`--context-tokens`, [`rcattr.eval.attribution.long_context`][rcattr.eval.attribution.long_context]) keeps its records' ids, so
every method is compared with itself on the short run's same records (paired bootstrap over records), and
the default with each baseline in the same run. Writes `context_length.md` (one row per run and method)
and `context_length.png` (accuracy against the prompt's length, a line per method, a marker per position).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rcattr.eval.attribution.methods import default_methods
from rcattr.eval.attribution.recipes import DEFAULT, ablation
from rcattr.eval.common.metrics import accuracy, bootstrap_interval, paired_difference
from rcattr.eval.common.run_store import read_rows

Hits = dict[str, list[bool]]  # source hits per gold span, by record id
DEFAULT_ROW = next(recipe.label for recipe in ablation() if recipe.lever == DEFAULT)
BASELINES = ("bm25", "hidden_state", "random")
MARKERS = {None: "o", "start": "^", "middle": "s", "end": "v"}


def run_hits(*folders: Path) -> dict[str, Hits]:
    """Every table row's hits in the run folders `folders` (runs of the same records, e.g. a method added in
    a folder of its own), from their rows on disk."""
    table: dict[str, Hits] = {}
    for folder in folders:
        for name, method in default_methods().items():
            lines = {str(row["id"]): row for row in read_rows(folder / "records", name)}
            for label, rows in method.table(lines).items():
                table.setdefault(label, {}).update({key: row["source"] for key, row in rows.items()})
    return table


def _paired_cell(hits: Hits, reference: Hits) -> str:
    shared = [key for key in hits if key in reference]
    if not shared:
        return "—"
    difference, low, high = paired_difference([hits[k] for k in shared], [reference[k] for k in shared])
    return f"{difference:+.1%} [{low:+.1%}, {high:+.1%}]"


def _number(value: float, spec: str) -> str:
    return "—" if math.isnan(value) else format(value, spec)


def _run_label(results: dict[str, Any]) -> tuple[str, float, str | None]:
    stretch = results["config"].get("long_context")
    position = stretch["position"] if stretch else None
    tokens = results.get("prompt_tokens", {}).get("mean", float("nan"))
    return ("short" if not stretch else f"{stretch['tokens']:,} · {position}"), tokens, position


def context_length_table(
    short: Sequence[Path], runs: Sequence[Path], rows: Sequence[str]
) -> tuple[str, list[dict[str, Any]]]:
    """The Markdown table of `runs` beside the short run `short` (its folders: every one a run of the same
    file and model), for the table rows `rows`; and the points of the plot."""
    reference = run_hits(*short)
    long_hits = [run_hits(run) for run in runs]
    ids = {key for hits in long_hits for rows in hits.values() for key in rows}  # the long runs' records
    lines = [
        "| context | tokens (run mean) | documents (run mean) | method | spans | accuracy (95% CI) "
        "| − itself, short context, same records (paired 95% CI) | default − it (paired 95% CI) |",
        "|---|---:|---:|---|---:|---|---|---|",
    ]
    points = []
    for folder, hits in ((short[0], reference), *zip(runs, long_hits, strict=True)):
        results = json.loads((folder / "results.json").read_text())
        label, tokens, position = _run_label(results)
        documents = results.get("documents", {}).get("mean", float("nan"))
        for row in rows:
            if row not in hits:
                continue
            mine = {key: value for key, value in hits[row].items() if key in ids}
            if not mine:
                continue
            score, n_spans = accuracy([hit for spans in mine.values() for hit in spans])
            low, high = bootstrap_interval(list(mine.values()))
            against_short = "reference" if hits is reference else _paired_cell(mine, reference.get(row, {}))
            default = hits.get(DEFAULT_ROW, {})
            against_default = "—" if row == DEFAULT_ROW else _paired_cell(default, mine)
            lines.append(
                f"| {label} | {_number(tokens, ',.0f')} | {_number(documents, '.1f')} | {row} | {n_spans} | {score:.1%} [{low:.1%}, {high:.1%}] "
                f"| {against_short} | {against_default} |"
            )
            points.append({"method": row, "tokens": tokens, "position": position, "accuracy": score})
    return "\n".join(lines), points


def plot_context_length(points: Sequence[dict], path: Path, title: str) -> Path:
    """Accuracy against the prompt's mean length: a line per method through the `middle` runs (and the
    short one), a marker per gold position."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.5, 4))
    for method in dict.fromkeys(point["method"] for point in points):
        mine = [point for point in points if point["method"] == method]
        line = sorted((p for p in mine if p["position"] in (None, "middle")), key=lambda p: p["tokens"])
        (drawn,) = axes.plot([p["tokens"] for p in line], [p["accuracy"] for p in line], label=method)
        for point in mine:
            axes.scatter(
                point["tokens"], point["accuracy"], marker=MARKERS[point["position"]], color=drawn.get_color()
            )
    axes.set_xscale("log", base=2)
    axes.set_xlabel("prompt and answer, tokens (mean; markers: ○ short, ▲ start, ■ middle, ▼ end)")
    axes.set_ylabel("chunk-level accuracy")
    axes.set_title(title)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Write the table and the plot of the command line's runs."""
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.attribution.context_length",
        description="Accuracy against context length and gold position: long-context runs of the attribution "
        "benchmark beside the short run of the same file and model.",
    )
    parser.add_argument(
        "--short",
        type=Path,
        nargs="+",
        required=True,
        help="the run folder(s) of the same records without --context-tokens (the first one's results.json "
        "gives the short prompts' lengths)",
    )
    parser.add_argument(
        "--runs", type=Path, nargs="+", required=True, help="run folders with --context-tokens"
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for context_length.md and .png")
    parser.add_argument(
        "--rows",
        default=",".join((DEFAULT_ROW, *BASELINES)),
        help="comma-separated table rows of the runs (default: the default RCAttributor and the baselines)",
    )
    parser.add_argument("--title", default="Attribution accuracy against context length")
    args = parser.parse_args(argv)
    table, points = context_length_table(args.short, args.runs, args.rows.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "context_length.md").write_text(table + "\n")
    plot_context_length(points, args.out / "context_length.png", args.title)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
