"""How label-free cut-offs on the unsupported-token signals behave across models, from committed rows only.

    python benchmarks/bench_support_cutoffs.py [--signal token_support] [--cutoffs 0.1 0.25 0.5]

Reads the unsupported-token rows committed under ``docs/records/groundedness_unsupported*`` (SmolLM2-135M and
Gemma-3-270m, QuoteSum and Veri-Gran edited answers; no model is run) and prints, for each fixed cut-off on a
signal, the share of untouched answer tokens it flags and of edited ones it catches, per model and dataset.
Blank tokens are left out, as ``RCAttributionResult.unsupported_tokens`` leaves them out. For
``token_support`` (rows hold minus its log-odds) the cut-offs are token-support values, as
``unsupported_tokens(threshold)`` takes them; for any other signal they are values of the row's signal.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from pathlib import Path

RECORDS = Path(__file__).resolve().parents[1] / "docs" / "records"
RUNS = {"SmolLM2-135M": "groundedness_unsupported", "Gemma-3-270m": "groundedness_unsupported_gemma"}


def flag_rates(rows: list[dict], signal: str, cutoff: float) -> tuple[float, float, int, int]:
    """Share of untouched tokens flagged and of edited tokens caught (signal > cutoff), and their counts."""
    untouched = edited = false_flags = caught = 0
    for row in rows:
        for token, kind, value in zip(row["tokens"], row["kinds"], row[signal], strict=True):
            if not token.strip():
                continue
            flagged = value > cutoff
            if kind:
                edited, caught = edited + 1, caught + flagged
            else:
                untouched, false_flags = untouched + 1, false_flags + flagged
    return false_flags / untouched, caught / edited, untouched, edited


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--signal", default="token_support", help="a token signal of the rows (higher: less supported)"
    )
    parser.add_argument("--cutoffs", type=float, nargs="+", default=[0.1, 0.25, 0.5])
    args = parser.parse_args()
    print(f"signal {args.signal}: untouched tokens flagged / edited tokens caught, by cut-off\n")
    print(
        "| model | dataset | tokens (untouched / edited) | "
        + " | ".join(f"{'<' if args.signal == 'token_support' else '>'} {c:g}" for c in args.cutoffs)
        + " |"
    )
    print("|---|---|---|" + "---|" * len(args.cutoffs))
    for model, run in RUNS.items():
        for dataset in ("quotesum", "verigran"):
            path = RECORDS / run / "records" / f"tokens-{dataset}.jsonl.gz"
            rows = [json.loads(line) for line in gzip.open(path, "rt")]
            cells, counts = [], ""
            for cutoff in args.cutoffs:
                if args.signal == "token_support":  # support < c  <=>  -log-odds > -logit(c)
                    cutoff = -math.log(cutoff / (1 - cutoff))
                flagged, caught, untouched, edited = flag_rates(rows, args.signal, cutoff)
                cells.append(f"{flagged:.1%} / {caught:.1%}")
                counts = f"{untouched} / {edited}"
            print(f"| {model} | {dataset} | {counts} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
