"""The compress-once folders of ``make eval-kv-distill`` side by side: per task and share evicted, KVzip, RCKVCache's
default scorer, its replay teacher and the distilled score, with what each finds of the full cache's answers and
the paired differences the runner computed (95% bootstrap intervals over contexts).

    python benchmarks/kv_distilled_table.py docs/records/kv_distilled/{needle,squad,qmsum}-2048
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rcattr.eval.common.run_store import read_rows

RECIPE = "model_budget+value_norm+sinks=4"
CACHES = {  # label in the folder (ratio r) -> the name in the table
    "kvzip/r={r:g}": "KVzip (kvpress)",
    f"rc/r={{r:g}}/w=16/{RECIPE}": "window (today's scorer)",
    f"rc/r={{r:g}}/w=16/{RECIPE}+replay+softmax": "replay teacher",
    f"rc/r={{r:g}}/w=16/{RECIPE}+distilled": "**distilled**",
}


def _interval(values: list[float] | None, digits: int) -> str:
    if not values:
        return "—"
    point, low, high = values
    return f"{point:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def found(rows: list[dict[str, Any]], label: str) -> tuple[int, int]:
    """Questions ``label`` answers right among those the full cache answers right, and those."""
    full = {(row["context_id"], row["id"]) for row in rows if row["method"] == "full" and row["match"]}
    right = {(row["context_id"], row["id"]) for row in rows if row["method"] == label and row["match"]}
    return len(full & right), len(full)


def task_table(folder: Path) -> str:
    """One task's rows: every cache at every ratio the folder ran."""
    results = json.loads((folder / "results.json").read_text())
    rows = list(read_rows(folder, "records"))
    methods, comparisons = results["methods"], results["comparisons"]
    ratios = sorted({m["setting"]["ratio"] for m in methods.values() if "ratio" in m["setting"]})
    lines = [
        f"**{results['config']['dataset']}**, {results['n_contexts']} contexts of up to "
        f"{results['config']['context_tokens']} tokens, {results['n_questions']} questions ({folder.name}):",
        "",
        "| evicted | cache | VER | found of the full cache's | ROUGE-L | prefill × plain | VER − KVzip | match − KVzip "
        "| VER − window |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    full = methods["full"]
    hits, total = found(rows, "full")
    lines.append(f"| — | full cache | 0 | {hits}/{total} | {full['rougeL']:.3f} | 1.00 | — | — | — |")
    for ratio in ratios:
        for pattern, name in CACHES.items():
            label = pattern.format(r=ratio)
            if label not in methods:
                continue
            row, against = methods[label], comparisons.get(label, {})
            hits, total = found(rows, label)
            kvzip, default = against.get("kvzip", {}), against.get("default", {}).get("ver")
            lines.append(
                f"| {ratio:.1%} | {name} | {row['ver']:.4f} | {hits}/{total} | {row['rougeL']:.3f} | "
                f"{row['prefill_cost']:.2f} | {_interval(kvzip.get('ver'), 4)} | {_interval(kvzip.get('match'), 3)} | "
                f"{_interval(default, 4)} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="compress-once run folders")
    for folder in parser.parse_args().folders:
        print(task_table(folder))


if __name__ == "__main__":
    main()
