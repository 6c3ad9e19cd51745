"""The long-generation benchmark: decode-time eviction against kvpress's decoding presses at one budget.

    python -m rcattr.eval.kv_long --task qmsum --limit 10 --out runs/kv-long-qmsum

Every compressing cache keeps `--budget` entries per key head after each eviction and evicts every
`--every` generated tokens: RCKVCache with decode-time eviction (`rc`), RCKVCache compressing the prompt
only (`rc_prefill_only`, the cache then grows with every token), and kvpress's `PrefillDecodingPress` of
each scorer press (`kvpress_*`: the scorer prunes the context at prefill, then `DecodingPress` cuts back
to the budget). Tasks: `qmsum`, each QMSum validation meeting's general query answered at up to 512 new
tokens after the meeting's opening (`--context-tokens`), and `needle`, the needle prompts of 1k and 2k
tokens with a `--prefix-tokens` answer prefix the caches are teacher-forced through before the value.

Measured per record (one token at a time, as generation runs): KL(full ‖ cache) and top-1 agreement of the
next-token distributions teacher-forced on the full cache's greedy answer, peak KV bytes, and on each cache's
own greedy answer ROUGE-L (QMSum) or needle match, and tokens per second. The report (`results.md`,
`results.json`, `bytes_held.png`) gives 95% bootstrap intervals and every method's KL minus `rc`'s
with a paired interval. Rows go to `OUT/records.jsonl` as they come; a run resumes from them. kvpress pins
transformers < 5.3: run the presses with `.venv-kvpress/bin/python` (`make setup-kvpress`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rcattr.eval.common.command import benchmark_parser, checked_settings, run_settings
from rcattr.eval.common.run_args import add_run_arguments, parse_methods, run_command
from rcattr.eval.kv_long.config import METHODS, DecodeBudget, LongBenchmarkConfig
from rcattr.eval.kv_long.data import LONG_TASKS
from rcattr.options import positive_int

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    defaults = LongBenchmarkConfig("qmsum")
    parser = benchmark_parser("kv_long", __doc__ or "", as_written=True)
    parser.add_argument("--task", required=True, choices=LONG_TASKS)
    add_run_arguments(parser, METHODS)
    parser.add_argument(
        "--budget",
        type=positive_int,
        default=defaults.budget.tokens,
        help="entries kept per key head (default 256)",
    )
    parser.add_argument(
        "--every",
        type=positive_int,
        default=defaults.budget.every,
        help="evict every N generated tokens (default 32)",
    )
    parser.add_argument(
        "--context-tokens",
        type=positive_int,
        default=defaults.context_tokens,
        help="QMSum: meeting excerpt length (default 1024)",
    )
    parser.add_argument(
        "--prefix-tokens",
        type=positive_int,
        default=defaults.prefix_tokens,
        help="needle: answer prefix length (default 256)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        help="answer length limit (default 512 for qmsum, 32 for needle)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark as the command line `argv` says; returns the exit status."""
    args = _parser().parse_args(argv)
    config = run_settings(
        LongBenchmarkConfig,
        args,
        methods=parse_methods(args.methods, METHODS),
        budget=checked_settings(lambda: DecodeBudget(args.budget, args.every)),
    )
    from rcattr.eval.kv.methods import require_kvpress
    from rcattr.eval.kv_long.methods import DecodingPressMethod, long_methods
    from rcattr.eval.kv_long.report import table_long
    from rcattr.eval.kv_long.runner import LongGenerationBenchmark

    if any(isinstance(long_methods()[name], DecodingPressMethod) for name in config.methods):
        require_kvpress()
    return run_command(
        args,
        config.model,
        lambda model, tokenizer, shard: LongGenerationBenchmark(config, model, tokenizer, args.out, shard),
        table_long,
    )
