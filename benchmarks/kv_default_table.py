"""RCKVCache's no-argument default before and after (``c=1``, then ``ratio=0.5``) in KV benchmark folders that ran
both, side by side with the full cache, KVzip and the distilled score where the folder has them, and the new
default minus the old, paired over contexts (compress once) or questions (question after context), 95% bootstrap
intervals.

    python benchmarks/kv_default_table.py docs/records/kv_default/{squad,needle,qmsum}-2048
    python benchmarks/kv_default_table.py docs/records/kv_default/question-*
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from rcattr.eval.common.metrics import paired_mean_difference
from rcattr.eval.common.run_store import read_rows
from rcattr.eval.kv.variants import DEFAULT_RECIPE

OLD, NEW = f"rc/c=1/w=16/{DEFAULT_RECIPE}", f"rc/r=0.5/w=16/{DEFAULT_RECIPE}"
CACHES = {  # label in the folder -> the name in the table
    "full": "full cache",
    "kvzip/r=0.5": "KVzip at 50% (kvpress)",
    OLD: "`c=1` (the old default)",
    NEW: "**`ratio=0.5` (the default)**",
    f"{NEW}+distilled": "`ratio=0.5` with the distilled score",
}


def _unit_means(rows: list[dict[str, Any]], metric: str) -> dict[str, float]:
    """``metric`` averaged over each context's questions (compress once), else per question."""
    grouped: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        grouped[row.get("context_id", row["id"])].append(float(row[metric]))
    return {unit: float(np.mean(values)) for unit, values in grouped.items()}


def _difference(new: list[dict[str, Any]], old: list[dict[str, Any]], metric: str) -> str:
    """``metric`` of ``new`` minus ``old`` on the units both hold, ``+d [low, high]``."""
    mine, theirs = _unit_means(new, metric), _unit_means(old, metric)
    units = sorted(set(mine) & set(theirs))
    point, low, high = paired_mean_difference([mine[u] for u in units], [theirs[u] for u in units])
    return f"{point:+.3f} [{low:+.3f}, {high:+.3f}]"


def _found(rows: list[dict[str, Any]], full: list[dict[str, Any]]) -> str:
    """Questions answered right among those the full cache answers right."""
    right = {row["id"] for row in full if row["match"]}
    if not right:
        return "—"
    return f"{sum(1 for row in rows if row['match'] and row['id'] in right)}/{len(right)}"


def folder_table(folder: Path) -> str:
    """One folder's caches and the new default minus the old."""
    config = json.loads((folder / "config.json").read_text())
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in read_rows(folder, "records"):
        by_label[row["method"]].append(row)
    full = by_label["full"]
    units = {row.get("context_id", row["id"]) for row in full}
    lines = [
        f"**{config['dataset']}** ({folder.name}; protocol {config.get('protocol', 'question')}, {len(units)} "
        f"{'contexts' if 'context_id' in full[0] else 'records'}, {len(full)} questions):",
        "",
        "| cache | evicted | VER | answer match | found of the full cache's | ROUGE-L |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, name in CACHES.items():
        rows = by_label.get(label)
        if not rows:
            continue
        evicted = np.mean([row["compression_ratio"] for row in rows])
        lines.append(
            f"| {name} | {evicted:.1%} | {np.mean([row['ver'] for row in rows]):.4f} | "
            f"{np.mean([row['match'] for row in rows]):.3f} | {_found(rows, full)} | "
            f"{np.mean([row['rougeL'] for row in rows]):.3f} |"
        )
    if by_label.get(OLD) and by_label.get(NEW):
        differences = ", ".join(
            f"{metric} {_difference(by_label[NEW], by_label[OLD], metric)}"
            for metric in ("ver", "match", "rougeL")
        )
        lines += ["", f"New default − old: {differences}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="KV benchmark run folders")
    print("\n".join(folder_table(folder) for folder in parser.parse_args().folders))


if __name__ == "__main__":
    main()
