"""What a claim's verdict costs against one attribution, side by side in one process.

Each claim is a QuoteSum summary (its markers stripped) over ``--passages`` passages (its record's sources,
then other records' until there are that many), teacher-forced on the default model (or ``--model``). Per
claim, interleaved ``--repeats`` times, the median time of:

- ``attribute``: ``RCAttributor(model, tokenizer, probe=None).attribute(inputs, target=claim)``, the
  attribution alone (no per-head rows kept);
- ``verdict``: the default attributor (the probe shipped for the model) ``attribute(...).citations()``: every
  sentence's verdict, what ``claim_verdict`` runs;
- ``second pass``: the attribution, its citations and one more forward for every head's statistics
  (``token_statistics``), what a verdict cost before it read the attribution's own pass;
- ``forward``: one plain forward over the same ids.

The ratios to ``attribute`` are medians over the claims; compare ratios, not times (the machine is shared).

    python benchmarks/bench_verdict.py --claims 8 --passages 12 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.head_statistics import token_statistics
from rcattr.runtime.models import load_model
from rcattr.text.prompting import ContextInput


def claims(
    n: int, passages: int, path: Path = Path("data/quotesum/dev.jsonl")
) -> list[tuple[ContextInput, str]]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    pool = list(dict.fromkeys(r[f"source{i}"] for r in records for i in range(1, 9) if r.get(f"source{i}")))
    out = []
    for record in records[::5][:n]:
        own = [record[f"source{i}"] for i in range(1, 9) if record.get(f"source{i}")]
        documents = (own + [p for p in pool if p not in own])[:passages]
        summary = re.sub(r"\[ \d+ (.*?) \]", r"\1", record["summary"]).strip()
        out.append((ContextInput(documents, record["question"]), summary))
    return out


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def claim_times(
    plain: RCAttributor, default: RCAttributor, inputs: ContextInput, claim: str, repeats: int
) -> tuple[dict[str, float], int]:
    """Each work's median seconds on one claim (interleaved, after a warm-up), and the claim's prompt tokens."""
    example = plain.prepare(inputs, claim, "sentence")
    model = plain.model
    runs: dict[str, Callable[[], object]] = {
        "attribute": lambda: plain.attribute(inputs, target=claim),
        "verdict": lambda: default.attribute(inputs, target=claim).citations(),
        "second pass": lambda: (
            plain.attribute(inputs, target=claim).citations(),
            token_statistics(model, example),
        ),
        "forward": lambda: model(example.ids, use_cache=False, logits_to_keep=1),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    with torch.no_grad():
        for run in runs.values():
            run()  # warm-up
        for _ in range(repeats):
            for name, run in runs.items():
                times[name].append(timed(run))
    return {name: statistics.median(values) for name, values in times.items()}, example.ids.shape[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model")
    parser.add_argument("--claims", type=int, default=8)
    parser.add_argument("--passages", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, tokenizer = load_model(args.model)
    plain, default = RCAttributor(model, tokenizer, probe=None), RCAttributor(model, tokenizer)
    if default.probe is None:
        raise SystemExit(f"no probe is shipped for {args.model}: nothing to compare")
    ratios: dict[str, list[float]] = {"verdict": [], "second pass": [], "forward": []}
    tokens = []
    for inputs, claim in claims(args.claims, args.passages):
        times, n_tokens = claim_times(plain, default, inputs, claim, args.repeats)
        tokens.append(n_tokens)
        for name in ratios:
            ratios[name].append(times[name] / times["attribute"])
    print(
        f"{len(tokens)} claims over {args.passages} passages, {min(tokens)}-{max(tokens)} tokens, {model.config.name_or_path}"
    )
    print("| work | × one attribute() (median over claims) | range |\n|---|---:|---|")
    for name, values in ratios.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} |")


if __name__ == "__main__":
    main()
