"""Two models of one family side by side on the records both runs hold: each method's accuracy, the default's paired
lead over each baseline in each model, and the heads the default selects and how often they are few (the runner's
folders: ``benchmarks/head_levers.py`` or ``python -m rcattr.eval.attribution`` with
``heads,bm25,hidden_state``).

Each ``--pair "LABEL=SMALL_FOLDER:LARGE_FOLDER"`` is one file and length; the records are those both folders hold
(a method run on fewer records, e.g. ``--method-limit hidden_state=40``, is compared on the records it has).

    python benchmarks/model_scale_table.py --names "0.5B,1.5B" \\
        --pair "QuoteSum short=docs/records/long_table/qwen_quotesum:docs/records/long_table/qwen15_quotesum" \\
        --out docs/records/long_table/scale.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rcattr.eval.attribution.context_length import Hits, run_hits
from rcattr.eval.attribution.methods import default_methods
from rcattr.eval.common.metrics import accuracy, bootstrap_interval, paired_difference
from rcattr.eval.common.run_store import read_rows
from rcattr.heads.scores import min_heads

DEFAULT = "default: RCAttributor()"
BASELINES = {
    "heads' vote alone (`lexical=False`)": "heads' vote: RCAttributor(lexical=False)",
    "BM25": "bm25",
    "hidden states": "hidden_state",
    "all-heads attention": "attention · all heads (AttentionAttributor)",
    "paper's recipe": "paper: attention · top-20 heads (RCAttributor.paper)",
}


def _accuracy(hits: Hits, ids: set[str]) -> str:
    mine = [hits[key] for key in sorted(ids) if key in hits]
    if not mine:
        return "—"
    score = accuracy([hit for spans in mine for hit in spans])[0]
    low, high = bootstrap_interval(mine)
    return f"{100 * score:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def _lead(default: Hits, other: Hits, ids: set[str]) -> str:
    shared = sorted(key for key in ids if key in default and key in other)
    if not shared:
        return "—"
    difference, low, high = paired_difference([default[k] for k in shared], [other[k] for k in shared])
    text = f"{100 * difference:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"
    return f"**{text}**" if low > 0 else text


def _heads(folder: Path, ids: set[str]) -> str:
    """The default's heads per record: mean (fewest–most), the share of records below the stated minimum."""
    total = json.loads((folder / "results.json").read_text())["total_heads"]
    lines = {str(row["id"]): row for row in read_rows(folder / "records", "heads")}
    rows = default_methods()["heads"].table(lines).get(DEFAULT, {})
    counts = [row["heads"] for key, row in rows.items() if key in ids]
    if not counts:
        return "—"
    few = sum(count < min_heads(total) for count in counts) / len(counts)
    return f"{sum(counts) / len(counts):.1f} ({min(counts)}–{max(counts)}) · few {100 * few:.0f}%"


def pair_table(label: str, folders: tuple[Path, Path], names: tuple[str, str]) -> str:
    """The Markdown table of one file and length, the two models' folders side by side."""
    hits = [run_hits(folder) for folder in folders]
    ids = set(hits[0].get(DEFAULT, {})) & set(hits[1].get(DEFAULT, {}))
    n_spans = sum(len(hits[0][DEFAULT][key]) for key in ids)
    small, large = names
    lines = [
        f"**{label}** ({len(ids)} records, {n_spans} spans: those both runs hold)",
        "",
        f"| method | {small} accuracy % | {large} accuracy % | default − it, {small} | default − it, {large} |",
        "|---|---:|---:|---:|---:|",
        f"| **default** | {_accuracy(hits[0][DEFAULT], ids)} | {_accuracy(hits[1][DEFAULT], ids)} | | |",
    ]
    for name, row in BASELINES.items():
        cells = [_accuracy(h.get(row, {}), ids) for h in hits]
        leads = [_lead(h[DEFAULT], h.get(row, {}), ids) for h in hits]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {leads[0]} | {leads[1]} |")
    lines += [
        f"| heads the default selects: mean (fewest–most) · records below 5% of heads | {_heads(folders[0], ids)} "
        f"| {_heads(folders[1], ids)} | | |",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pair", action="append", required=True, help='"LABEL=SMALL_FOLDER:LARGE_FOLDER"')
    parser.add_argument("--names", default="small,large", help="the two models' names (default small,large)")
    parser.add_argument("--out", type=Path, help="write the tables here too")
    args = parser.parse_args()
    small, large = args.names.split(",")
    tables = []
    for item in args.pair:
        label, _, folders = item.partition("=")
        first, _, second = folders.partition(":")
        tables.append(pair_table(label, (Path(first), Path(second)), (small, large)))
    text = "\n".join(tables)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
