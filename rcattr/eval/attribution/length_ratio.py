"""Accuracy against the length ratio: runs of the length benchmark ([`rcattr.eval.attribution.lengths`][rcattr.eval.attribution.lengths]).

    python -m rcattr.eval.attribution.length_ratio --runs runs/lengths/smollm2_short_gold \\
        runs/lengths/smollm2_long_gold --out docs/records/lengths/smollm2

Each record's length ratio is its gold document's characters over its distractors' mean, rebuilt from the
run's `config.json` (the records are seeded). Per run, `length_ratio.md` gives the accuracy of the rows of
[`ROWS`][rcattr.eval.attribution.length_ratio.ROWS] over all records and per ratio bucket (powers of two), with bootstrap intervals over records, how
often the top document is the record's longest (rows with document scores), and the paired differences that
matter: the default against each baseline, the sweep's length-normalised chunk score against the default, and
each way of adding up a document's sentences ([`rcattr.eval.attribution.document_scores`][rcattr.eval.attribution.document_scores]) against the sum.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from rcattr.eval.attribution.context_length import DEFAULT_ROW
from rcattr.eval.attribution.document_scores import AGGREGATIONS
from rcattr.eval.attribution.lengths import length_ratio, load_records
from rcattr.eval.attribution.method import Row
from rcattr.eval.attribution.methods import default_methods
from rcattr.eval.common.metrics import accuracy, bootstrap_interval, paired_difference
from rcattr.eval.common.run_store import read_rows

EDGES = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8)
NAMES = ("1/8", "1/4", "1/2", "1", "2", "4", "8")
BASELINES = ("bm25", "hidden_state")
SUMMED = "documents · sum"
SPAN_MEAN = "default + span mean"  # the sweep's length-normalised chunk score (a lever, not the default)
ROWS = ("rc", DEFAULT_ROW, SPAN_MEAN, *BASELINES, "random", *(f"documents · {name}" for name in AGGREGATIONS))


def bucket(ratio: float) -> int:
    """The index of `ratio`'s bucket: 0 below 1/8, `i` in `[EDGES[i-1], EDGES[i])`, the last from 8."""
    return sum(ratio >= edge for edge in EDGES)


def bucket_name(index: int) -> str:
    if index == 0:
        return f"< {NAMES[0]}"
    if index == len(EDGES):
        return f"≥ {NAMES[-1]}"
    return f"{NAMES[index - 1]}–{NAMES[index]}"


def run_rows(folder: Path) -> dict[str, dict[str, Row]]:
    """Every table row's lines in the run folder `folder`, by record id."""
    table: dict[str, dict[str, Row]] = {}
    for name, method in default_methods().items():
        lines = {str(row["id"]): row for row in read_rows(folder / "records", name)}
        for label, rows in method.table(lines).items():
            if rows:
                table[label] = rows
    return table


def _cell(hits: Sequence[list[bool]]) -> str:
    if not hits:
        return "—"
    score = accuracy([hit for row in hits for hit in row])[0]
    low, high = bootstrap_interval(hits)
    return f"{score:.1%} [{low:.1%}, {high:.1%}]"


def _paired(mine: dict[str, list[bool]], theirs: dict[str, list[bool]], ids: Sequence[str]) -> str:
    shared = [key for key in ids if key in mine and key in theirs]
    if not shared:
        return "—"
    difference, low, high = paired_difference([mine[k] for k in shared], [theirs[k] for k in shared])
    return f"{difference:+.1%} [{low:+.1%}, {high:+.1%}]"


def length_ratio_table(folder: Path) -> str:
    """The Markdown tables of one run of the length benchmark."""
    config = json.loads((folder / "config.json").read_text())
    records = load_records(config["dataset"], config["split"], config["limit"])
    ratios = {record.id: length_ratio(record) for record in records}
    longest = {
        record.id: max(range(len(record.chunks)), key=lambda i: len(record.chunks[i])) for record in records
    }
    table = run_rows(folder)
    hits = {
        label: {key: row["source"] for key, row in rows.items() if key in ratios}
        for label, rows in table.items()
    }
    ids = [record.id for record in records if any(record.id in rows for rows in hits.values())]
    buckets = sorted({bucket(ratios[key]) for key in ids})
    members = {b: [key for key in ids if bucket(ratios[key]) == b] for b in buckets}
    header = " | ".join(f"ratio {bucket_name(b)} ({len(members[b])} rec.)" for b in buckets)
    lines = [
        f"### {config['dataset']}: {len(ids)} records, length ratio {min(ratios[k] for k in ids):.2f} to "
        f"{max(ratios[k] for k in ids):.2f} (median {sorted(ratios[k] for k in ids)[len(ids) // 2]:.2f})",
        "",
        f"| row | all | {header} | top document the longest |",
        "|---|---|" + "---|" * len(buckets) + "---|",
    ]
    for label in (row for row in ROWS if row in hits):
        mine = hits[label]
        cells = [_cell(list(mine.values()))] + [
            _cell([mine[key] for key in members[b] if key in mine]) for b in buckets
        ]
        picks = [
            max(range(len(row["chunk_scores"])), key=row["chunk_scores"].__getitem__) == longest[key]
            for key, row in table[label].items()
            if "chunk_scores" in row and key in longest
        ]
        share = f"{sum(picks) / len(picks):.1%}" if picks else "—"
        lines.append(f"| {label} | {' | '.join(cells)} | {share} |")
    default = "rc" if "rc" in hits else DEFAULT_ROW
    pairs = (
        [(default, name) for name in BASELINES]
        + [(SPAN_MEAN, DEFAULT_ROW)]
        + [(f"documents · {name}", SUMMED) for name in AGGREGATIONS if f"documents · {name}" != SUMMED]
    )
    lines += ["", f"| paired difference | all | {header} |", "|---|---|" + "---|" * len(buckets)]
    for first, second in pairs:
        if first in hits and second in hits:
            cells = [_paired(hits[first], hits[second], ids)] + [
                _paired(hits[first], hits[second], members[b]) for b in buckets
            ]
            lines.append(f"| {first} − {second} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the tables of the command line's runs."""
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.attribution.length_ratio",
        description="Accuracy against the length ratio (gold document / mean distractor, in characters) of "
        "runs of the length benchmark (--dataset squad_short_gold or squad_long_gold).",
    )
    parser.add_argument(
        "--runs", type=Path, nargs="+", required=True, help="run folders of the length benchmark"
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for length_ratio.md")
    args = parser.parse_args(argv)
    text = "\n\n".join(length_ratio_table(folder) for folder in args.runs) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "length_ratio.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
