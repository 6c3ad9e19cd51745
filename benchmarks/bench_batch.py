"""Throughput of RCAttributor.attribute_many() at several batch sizes against a loop of attribute() calls.

The examples are the first ``--limit`` QuoteSum dev records (``data/quotesum``, or ``$RCATTR_DATA/quotesum``):
the numbered sources and the question (``rcattr.eval.attribution.method.context_input``), chunks as the
context spans and the answer's sentences as output units, with the default offline model
(``rcattr.load_model()``, SmolLM2-135M-Instruct) and the default ``RCAttributor``.

1. Given answers (the gold summaries, teacher-forced): a loop of ``attribute(inp, answer)`` over the records,
   then ``attribute_many(inputs, answers, batch_size=B)`` for each ``--batch-sizes`` B (one left-padded
   forward per batch).
2. With ``--generate``, generated answers (greedy, ``--max-new-tokens``): a loop of ``attribute(inp)`` (each
   generates, then explains from its generation's cache) against ``attribute_many(inputs, batch_size=B)``
   (the answers of a batch generated together, left-padded, then one forward per batch).

Each mode runs its loop and its batch sizes one after the other, ``--repeats`` rounds interleaved, so that
the ratios see the same machine load; the figures are medians over the rounds. The machine is noisy:
compare the ratios to the loop (``x loop``: examples per second of the batch over those of the loop),
measured in the same run, not the absolute times. ``max seq_attr diff`` is the largest difference of
``seq_attr`` between a batch size's results and the loop's, over the records with the same answer (a padded
batch's kernels round differently: about 1e-7 in float32); ``same answers`` counts those records.

    python benchmarks/bench_batch.py --limit 32 --batch-sizes 1 4 16 --generate --json bench_batch.json

Quick smoke run:

    python benchmarks/bench_batch.py --limit 4 --batch-sizes 1 4 --generate --max-new-tokens 16
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from rcattr.options import positive_int


def run_mode(
    attributor: Any,
    inputs: list[Any],
    targets: list[str | None],
    gen_args: dict[str, Any],
    args: argparse.Namespace,
    label: str,
) -> list[dict[str, Any]]:
    """The loop and every batch size on the same examples, ``args.repeats`` interleaved rounds; one row per
    variant (``batch_size`` None for the loop)."""
    options = {"granularity": "chunk", "output_granularity": "sentence", "gen_args": gen_args}

    def loop() -> list[Any]:
        return [
            attributor.attribute(inp, target, **options) for inp, target in zip(inputs, targets, strict=True)
        ]

    def batched(size: int) -> list[Any]:
        return attributor.attribute_many(inputs, targets, batch_size=size, progress=False, **options)

    calls: dict[int | None, Any] = {
        None: loop,
        **{size: functools.partial(batched, size) for size in args.batch_sizes},
    }
    times: dict[int | None, list[float]] = {size: [] for size in calls}
    results: dict[int | None, Any] = {}
    for _ in tqdm(range(args.repeats), desc=label, unit="round"):
        for size, call in calls.items():
            start = time.perf_counter()
            results[size] = call()
            times[size].append(time.perf_counter() - start)
    loop_seconds = statistics.median(times[None])
    rows = []
    for size in calls:
        seconds = statistics.median(times[size])
        pairs = list(zip(results[size], results[None], strict=True))
        same = [many.answer == one.answer for many, one in pairs]
        rows.append(
            {
                "mode": label,
                "batch_size": size,
                "examples": len(inputs),
                "seconds": seconds,
                "examples_per_second": len(inputs) / seconds,
                "x_loop": loop_seconds / seconds,
                "same_answers": sum(same),
                "max_seq_attr_diff": max(
                    (
                        float((many.seq_attr - one.seq_attr).abs().max())
                        for (many, one), ok in zip(pairs, same, strict=True)
                        if ok
                    ),
                    default=float("nan"),
                ),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--limit", type=positive_int, default=32, help="the first N QuoteSum dev records (default 32)"
    )
    parser.add_argument(
        "--batch-sizes",
        type=positive_int,
        nargs="+",
        default=[1, 4, 16],
        help="attribute_many batch sizes (default 1 4 16)",
    )
    parser.add_argument(
        "--generate", action="store_true", help="also time generated answers (targets None) against the loop"
    )
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=64,
        help="with --generate: the answers' greedy new tokens (default 64)",
    )
    parser.add_argument(
        "--repeats", type=positive_int, default=1, help="interleaved rounds per mode (default 1)"
    )
    parser.add_argument(
        "--device", default=None, help="the model's device (default: cuda if available, else cpu)"
    )
    parser.add_argument("--json", type=Path, help="also write all numbers to this JSON file")
    args = parser.parse_args()
    import torch

    from rcattr.attribution.attributor import RCAttributor
    from rcattr.eval.attribution.method import context_input
    from rcattr.eval.common.datasets import load_quotesum
    from rcattr.runtime.models import load_model
    from rcattr.text.prompting import ContextInput

    torch.set_grad_enabled(False)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_model(device=device)
    attributor = RCAttributor(model, tokenizer)
    attributor.attribute(ContextInput("Paris is in France. It is big.", "Where?"), "In France.")  # warm-up
    records = load_quotesum(limit=args.limit)
    inputs = [context_input(record) for record in records]
    lengths = [
        attributor.prepare(inp, record.answer).ids.shape[1]
        for inp, record in zip(inputs, records, strict=True)
    ]
    gen_args = {"max_new_tokens": args.max_new_tokens}

    rows = run_mode(
        attributor, inputs, [record.answer for record in records], gen_args, args, "given answers"
    )
    if args.generate:
        rows += run_mode(attributor, inputs, [None] * len(inputs), gen_args, args, "generated answers")

    print(
        f"\nDefault model (SmolLM2-135M-Instruct, {device}), default RCAttributor, the first {len(records)} QuoteSum "
        f"dev records (prompt + gold answer: {min(lengths)}-{max(lengths)} tokens, median "
        f"{statistics.median(lengths):g}), granularity='chunk', output_granularity='sentence'; medians of "
        f"{args.repeats} interleaved round(s). 'x loop' = examples/s over those of the loop of attribute() calls\n"
    )
    print("| answers | batch size | seconds | examples/s | x loop | same answers | max seq_attr diff |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        size = "loop of attribute()" if row["batch_size"] is None else row["batch_size"]
        print(
            f"| {row['mode']} | {size} | {row['seconds']:.2f} | {row['examples_per_second']:.2f} "
            f"| {row['x_loop']:.2f} | {row['same_answers']}/{row['examples']} | {row['max_seq_attr_diff']:.1e} |"
        )
    if args.json:
        summary = {
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "rows": rows,
        }
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
