"""The field's tools beside RC: one table of accuracy, faithfulness and cost from two attribution runs.

    python benchmarks/bench_peers.py --forwards-only --out runs/forward.json   # on the runs' device
    python benchmarks/bench_peers.py --quotesum runs/qs --verigran runs/vg --forward runs/forward.json

The runs are ``python -m rcattr.eval.attribution`` folders with the methods and ``--faithfulness`` (docs/benchmarks/attribution.md
gives the commands). ``--forwards-only`` times one plain forward of each record's prompt and gold answer on this
machine's device (the mean over the records, after a warm-up), the unit of the "× forward" columns: run it where
the methods ran.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import torch

from rcattr.baselines import RandomAttributor
from rcattr.eval.attribution.method import context_input
from rcattr.eval.common.datasets import load_attribution
from rcattr.runtime.models import load_model


def forward_seconds(dataset: str, limit: int, device: str) -> dict[str, float]:
    """Mean seconds of one plain forward (prompt + gold answer) over the first ``limit`` records with gold spans."""
    model, tokenizer = load_model(device=device)
    layout = RandomAttributor(model, tokenizer)
    records = [r for r in load_attribution(dataset, "dev", None) if r.gold][:limit]
    examples = [layout.prepare(context_input(r), r.answer, "chunk").ids for r in records]
    seconds = []
    with torch.no_grad():
        model(examples[0])  # warm-up
        for ids in examples:
            if ids.is_cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            model(ids)
            if ids.is_cuda:
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
    return {"seconds": sum(seconds) / len(seconds), "records": len(seconds), "device": str(model.device)}


def _cell(row: dict[str, Any] | None, key: str, spec: str) -> str:
    if row is None or row.get(key) is None or (isinstance(row[key], float) and math.isnan(row[key])):
        return "—"
    text = format(row[key], spec)
    bounds = row.get(f"{key}_interval") or (row.get("interval") if key == "accuracy" else None)
    if bounds:
        text += f" [{format(bounds[0], spec)}, {format(bounds[1], spec)}]"
    if f"{key}_minus_reference" in row:
        low, high = row[f"{key}_minus_reference_interval"]
        text += f" ({format(row[key + '_minus_reference'], '+' + spec)} [{format(low, '+' + spec)}, {format(high, '+' + spec)}])"
    return text


def table(quotesum: dict[str, Any], verigran: dict[str, Any], forward: dict[str, Any]) -> str:
    """The markdown table: a row per method of either run."""
    runs = {"QuoteSum": quotesum, "Veri-Gran": verigran}
    names = list(dict.fromkeys(name for run in runs.values() for name in run.get("faithfulness", {})))
    header = ["method"]
    for label in runs:
        header += [
            f"{label} accuracy",
            f"{label} drop@1",
            f"{label} LDS",
            f"{label} s / example",
            f"{label} × forward",
        ]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for name in names:
        cells = [name]
        for label, run in runs.items():
            accuracy = run["methods"].get(name)
            faithful = run.get("faithfulness", {}).get(name)
            seconds = accuracy.get("seconds_per_example") if accuracy else None
            unit = forward.get(label, {}).get("seconds")
            cells += [
                _cell(accuracy, "accuracy", ".1%") + (f" ({accuracy['n_records']})" if accuracy else ""),
                _cell(faithful, "drop@1", ".2f") + (f" ({faithful['n_records']})" if faithful else ""),
                _cell(faithful, "lds", ".3f"),
                "—" if seconds is None else f"{seconds:.3f}",
                "—" if seconds is None or not unit else f"{seconds / unit:.1f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--forwards-only", action="store_true", help="time the forwards and write --out")
    parser.add_argument("--out", default="runs/forward.json")
    parser.add_argument("--qs-limit", type=int, default=100)
    parser.add_argument("--vg-limit", type=int, default=60)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quotesum", default="runs/qs", help="the QuoteSum run folder")
    parser.add_argument("--verigran", default="runs/vg", help="the Veri-Gran run folder")
    parser.add_argument("--forward", default="runs/forward.json", help="the --forwards-only file")
    args = parser.parse_args()
    if args.forwards_only:
        limits = {"QuoteSum": ("quotesum", args.qs_limit), "Veri-Gran": ("verigran", args.vg_limit)}
        timings = {
            label: forward_seconds(dataset, limit, args.device)
            for label, (dataset, limit) in limits.items()
            if limit
        }
        Path(args.out).write_text(json.dumps(timings, indent=2))
        print(json.dumps(timings, indent=2))
        return
    results = [
        json.loads((Path(folder) / "results.json").read_text()) for folder in (args.quotesum, args.verigran)
    ]
    forward = Path(args.forward)
    print(table(*results, json.loads(forward.read_text()) if forward.is_file() else {}))


if __name__ == "__main__":
    main()
