"""One method's rows of two attribution runs on the records they share (e.g. the same records short and at 8k):
each run's accuracy and the paired difference, records resampled, for every variant of the method.

    python benchmarks/same_records.py --short runs/long_table/qwen_verigran --long runs/long_table/qwen_verigran_8k
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rcattr.eval.attribution.recipes import current_labels
from rcattr.eval.common.metrics import paired_difference
from rcattr.eval.common.run_store import read_rows


def hits(folder: Path, method: str) -> dict[str, dict[str, list[bool]]]:
    """variant -> record id -> whether each output unit's top source was right (today's labels, `current_labels`)."""
    out: dict[str, dict[str, list[bool]]] = {}
    for record in read_rows(folder / "records", method):
        for stored, variant in current_labels(record["variants"]).items():
            row = record["variants"][stored]
            out.setdefault(variant, {})[record["id"]] = [bool(hit) for hit in row["source"]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--short", type=Path, required=True, help="a run folder")
    parser.add_argument("--long", type=Path, required=True, help="a run folder of some of the same records")
    parser.add_argument("--method", default="heads", help="the records file to read (default heads)")
    args = parser.parse_args()
    short, long = hits(args.short, args.method), hits(args.long, args.method)
    print(
        "| variant | records · units | short % | long % | long − short [95% CI] |\n|---|---|---:|---:|---:|"
    )
    for variant in sorted(short.keys() & long.keys()):
        ids = sorted(short[variant].keys() & long[variant].keys())
        a, b = [long[variant][i] for i in ids], [short[variant][i] for i in ids]
        units = sum(map(len, a))
        d, lo, hi = paired_difference(a, b)
        print(
            f"| {variant} | {len(ids)} · {units} | {100 * sum(map(sum, b)) / units:.1f} | "
            f"{100 * sum(map(sum, a)) / units:.1f} | {100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] |"
        )


if __name__ == "__main__":
    main()
