"""The table of issue 74: every model × file × length cell side by side, from the run folders of the attribution
runner (``heads,bm25,hidden_state``; ``benchmarks/head_levers.py`` folders are runner folders too).

Each cell is ``LABEL=FOLDER``; the rows are the methods (accuracy % [95% CI]), the default's lead over each of
them (paired, points [95% CI]), the records and spans, and the heads that see the whole context from the answer
and those the default selects (mean, fewest–most).

    python benchmarks/long_context_table.py --cell "SmolLM2 QS short=runs/t/smollm2_qs" \\
        --cell "SmolLM2 QS 8k=runs/t/smollm2_qs_8k" --out docs/records/long_table.md

With ``--levers`` it writes instead the levers' table of the same cells from each folder's ``levers.json``
(``benchmarks/head_levers.py``): each lever's paired lead over the default per cell, and in how many cells it wins,
ties or loses (its interval above, across or below 0), the count a default change is decided on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

METHODS = {
    "default": ("default: RCAttributor()", "rc"),
    "BM25": ("bm25",),
    "hidden state": ("hidden_state",),
    "all-heads attention": ("attention · all heads (AttentionAttributor)", "attention"),
    "paper's recipe": ("paper: attention · top-20 heads (RCAttributor.paper)", "rc_paper"),
    "heads' vote alone (lexical=False)": ("heads' vote: RCAttributor(lexical=False)",),
}
LEVERS = {
    "default (outlier heads)": "default, accuracy %",
    "default + BM25 where the heads disagree": "default + BM25 where the heads disagree (`lexical=True`)",
    "vote less every seeing head's mean": "vote less every seeing head's mean",
    "outliers of layer-centred scores among the heads that see": "outliers of layer-centred scores among the heads that see",
    "outliers among heads with at most half their vote on the last quarter": "heads with at most half their vote on the last quarter",
    "outliers among heads whose vote per token follows the spans' places at most 0.5": "heads whose vote per token follows the spans' places at most 0.5",
    "the same, at most 3 standard errors of the correlation": "the same, at most 3 standard errors",
    "the same, with BM25 where those heads disagree": "the same (3 standard errors), with BM25 where those heads disagree",
    "outliers less those whose vote follows the spans' places (3 standard errors)": "the default's outliers less those whose vote follows the spans' places (3 standard errors)",
    "the same (outliers less), with BM25 where those heads disagree": "the same, with BM25 where those heads disagree",
    "outliers, at least 3 heads that see": "at least 3 heads that see",
    "outliers, at least the stated minimum of heads that see (5% of all heads)": "at least the stated minimum of heads that see (5% of all)",
    "bm25": "BM25",
}
"""The rows of the levers' table: ``head_levers.py``'s name -> the label shown."""
SEEING = "heads' vote · all heads"  # TopHeads(1.0) among the heads that see: every seeing head


def _row(results: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any] | None:
    return next((results["methods"][n] for n in names if n in results["methods"]), None)


def _percent(value: float, interval: list[float] | None, signed: bool = False) -> str:
    text = f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"
    if interval is None:
        return text
    low, high = (f"{100 * v:+.1f}" if signed else f"{100 * v:.1f}" for v in interval)
    return f"{text} [{low}, {high}]"


def _heads(row: dict[str, Any] | None) -> str:
    if row is None or "heads" not in row:
        return "—"
    heads = row["heads"]
    return f"{heads['mean']:.1f} ({heads['min']}–{heads['max']})"


def table(cells: dict[str, Path]) -> str:
    """The markdown table of the cells' ``results.json``."""
    results = {label: json.loads((folder / "results.json").read_text()) for label, folder in cells.items()}
    head = "| | " + " | ".join(cells) + " |"
    rule = "|---|" + "---:|" * len(cells)
    lines = ["Accuracy % [95% CI]:", "", head, rule]
    for name, keys in METHODS.items():
        rows = [_row(r, keys) for r in results.values()]
        lines.append(
            f"| {name} | "
            + " | ".join(
                "—" if row is None else _percent(row["accuracy"], row.get("interval")) for row in rows
            )
            + " |"
        )
    lines += [
        "",
        "The default's lead, paired (points [95% CI]; bold: the interval is above 0):",
        "",
        head,
        rule,
    ]
    for name, keys in list(METHODS.items())[1:]:
        cells_text = []
        for r in results.values():
            row = _row(r, keys)
            if row is None or "difference_to_default" not in row:
                cells_text.append("—")
                continue
            low, high = row["difference_to_default_interval"]
            lead = _percent(-row["difference_to_default"], [-high, -low], signed=True)
            cells_text.append(f"**{lead}**" if -high > 0 else lead)
        lines.append(f"| default − {name} | " + " | ".join(cells_text) + " |")
    default_rows = [_row(r, METHODS["default"]) for r in results.values()]
    lines += [
        "| records · spans | "
        + " | ".join("—" if row is None else f"{row['n_records']} · {row['n_spans']}" for row in default_rows)
        + " |",
        "| prompt tokens, mean | "
        + " | ".join(f"{r['prompt_tokens']['mean']:.0f}" for r in results.values())
        + " |",
        "| heads that see | " + " | ".join(_heads(r["methods"].get(SEEING)) for r in results.values()) + " |",
        "| heads the default selects | " + " | ".join(_heads(row) for row in default_rows) + " |",
    ]
    return "\n".join(lines) + "\n"


def _lead(difference: list[float]) -> tuple[str, int]:
    """The paired difference in points, bold where its interval excludes 0, and its sign: 1 won, 0 tied, -1 lost."""
    text = _percent(difference[0], difference[1:], signed=True).replace("-", "−")
    low, high = difference[1:]
    verdict = 1 if low > 0 else -1 if high < 0 else 0
    return (f"**{text}**" if verdict else text), verdict


def levers_table(cells: dict[str, Path]) -> str:
    """The markdown table of the cells' ``levers.json``: :data:`LEVERS`' rows, one column per cell."""
    results = {label: json.loads((folder / "levers.json").read_text()) for label, folder in cells.items()}
    head = (
        "| lever | "
        + " | ".join(f"{label} ({r['records']})" for label, r in results.items())
        + " | won · tied · lost |"
    )
    lines = [
        "Paired against the default, points [95% CI]; bold: the interval excludes 0; · the heads the lever selects "
        "(mean):",
        "",
        head,
        "|---|" + "---:|" * (len(cells) + 1),
    ]
    for name, label in LEVERS.items():
        rows = [r["levers"][name] for r in results.values()]
        if name == "default (outlier heads)":
            texts = [f"{100 * row['accuracy']:.1f} ({row['heads']['mean']:.1f} heads)" for row in rows]
            lines.append(f"| {label} | " + " | ".join(texts) + " | |")
            continue
        leads = [_lead(row["against_default"]) for row in rows]
        verdicts = [verdict for _, verdict in leads]
        texts = [f"{text} · {row['heads']['mean']:.1f}" for (text, _), row in zip(leads, rows, strict=True)]
        tally = f"{verdicts.count(1)} · {verdicts.count(0)} · {verdicts.count(-1)}"
        lines.append(f"| {label} | " + " | ".join(texts) + f" | {tally} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cell", action="append", required=True, metavar="LABEL=FOLDER", help="repeatable")
    parser.add_argument("--levers", action="store_true", help="the levers' table of the cells instead")
    parser.add_argument("--out", type=Path, help="write the markdown here too")
    args = parser.parse_args()
    cells = {}
    for item in args.cell:
        label, _, folder = item.partition("=")
        if not folder:
            parser.error(f"--cell wants LABEL=FOLDER, got {item!r}")
        cells[label] = Path(folder)
    text = levers_table(cells) if args.levers else table(cells)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
