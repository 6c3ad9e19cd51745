"""The attribution benchmark: every method side by side on QuoteSum or Veri-Gran.

    python -m rcattr.eval.attribution --dataset quotesum --split dev --out runs/quotesum

Protocol (the RCStat paper's): the gold answer is teacher-forced, the context is the numbered
sources (`Document [i]: ...`) followed by the question, and each gold span of the answer is one
output unit; its prediction is the source of the highest-scoring context span (chunk-level
accuracy, paper Table 1). Each method writes one line per record to `OUT/records/METHOD.jsonl`
as it goes, so an interrupted run resumes where it stopped (`rcattr.eval.common.run_store`); `--shard I/N`
and `accelerate launch` split the records among processes (`rcattr.eval.common.sharding`) and the report
merges them. `sweep` is one RC pass per record that scores every head with both span scorers: it gives
the top-k / bottom-k curve of the paper's Fig. 5 and the RC variants of the table (attention over RC
top-k, bottom-k and all heads; RC expectation as the span scorer). `results.json`, `results.md` and
`sweep.png` are rewritten at the end from every record on disk.

The pieces: the settings (`attribution_config`), the methods (`attribution_method`, the built-in ones
in `attribution_methods`, the sweep in `attribution_sweep`), the runner (`attribution_runner`), the
results and the table (`attribution_results`, `attribution_report`). This module is the command line.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rcattr.eval.attribution.config import DEFAULT_METHOD_LIMITS, METHODS, OPTIONAL_METHODS, BenchmarkConfig
from rcattr.eval.attribution.lengths import DATASETS as LENGTH_DATASETS
from rcattr.eval.attribution.long_context import POSITIONS, LongContext
from rcattr.eval.common.command import benchmark_parser
from rcattr.eval.common.run_args import add_run_arguments, parse_methods, run_command
from rcattr.options import parse_head_count, positive_int

if TYPE_CHECKING:
    from rcattr.eval.attribution.methods import AttributionMethods

__all__ = ["config_from_args", "main"]


def _parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(
        "attribution",
        "Attribution benchmark: every method on QuoteSum or Veri-Gran, gold answer teacher-forced.",
    )
    parser.add_argument(
        "--dataset",
        required=True,
        choices=("quotesum", "verigran", *LENGTH_DATASETS),
        help="a benchmark file, or a direction of the length benchmark built from SQuAD v2 dev "
        "(rcattr.eval.attribution.lengths: a short gold sentence among paragraphs, or the reverse)",
    )
    parser.add_argument("--split", default="dev")
    add_run_arguments(parser, METHODS, optional=OPTIONAL_METHODS)
    parser.add_argument(
        "--method-limit",
        action="append",
        default=[],
        metavar="METHOD=N",
        help="run METHOD on the first N records only (default: "
        + ", ".join(f"{m}={n}" for m, n in DEFAULT_METHOD_LIMITS.items())
        + "; N=0 lifts the limit); repeatable",
    )
    parser.add_argument(
        "--top-k",
        type=parse_head_count,
        default="outliers",
        help="the default RC method's heads: a number, or 'outliers' (the default; see RCAttributor)",
    )
    parser.add_argument("--granularity", default="chunk", choices=("chunk", "sentence", "token"))
    parser.add_argument(
        "--max-tokens", type=positive_int, default=4096, help="leave out longer records (default 4096)"
    )
    parser.add_argument("--hidden-state-layer", type=int, help="layer for hidden_state (default: middle)")
    parser.add_argument(
        "--ig-steps", type=positive_int, default=16, help="integrated-gradients steps (default 16)"
    )
    parser.add_argument(
        "--faithfulness",
        type=int,
        default=0,
        metavar="N",
        help="ContextCite drop@k and LDS on the first N records",
    )
    parser.add_argument(
        "--lds-samples", type=positive_int, default=32, help="random ablations per record for LDS"
    )
    parser.add_argument(
        "--at2-estimator",
        metavar="FILE",
        help="at2: the score estimator the at2 package saved for the model (train one with "
        "python -m rcattr.eval.attribution.at2_training); the at2 method needs it",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=1,
        metavar="N",
        help="attribute N records at once (one padded forward for RC and the attention baseline; the others "
        "still run one by one); the same rows, faster on a GPU. Each record's seconds are then its batch's "
        "divided by the batch's records (default 1: one record at a time)",
    )
    parser.add_argument(
        "--skip",
        type=positive_int,
        metavar="N",
        help="leave out the file's first N lines (before --limit): --skip 44 --limit 44 runs lines 45 to 88, "
        "records held out of a run on the first 44",
    )
    parser.add_argument(
        "--context-tokens",
        type=positive_int,
        metavar="N",
        help="long-context run: hide each record's sources among distractor passages (the file's other questions' "
        "and SQuAD v2 paragraphs) until prompt and answer reach N tokens; records longer on their own are left out",
    )
    parser.add_argument(
        "--gold-position",
        choices=POSITIONS,
        default="middle",
        help="long-context run: where the record's sources go among the distractors (default middle)",
    )
    parser.add_argument(
        "--distractor-seed", type=int, default=0, help="long-context run: the distractors' order (default 0)"
    )
    return parser


def config_from_args(args: argparse.Namespace) -> BenchmarkConfig:
    """The settings of the command line's run; unknown methods end the command with the known ones."""
    methods = parse_methods(args.methods, METHODS)
    limits = dict(DEFAULT_METHOD_LIMITS)
    for item in args.method_limit:
        name, _, count = item.partition("=")
        if name not in METHODS or not count.isdigit():
            raise SystemExit(
                f"--method-limit wants METHOD=N with METHOD in {', '.join(METHODS)}, got {item!r}"
            )
        limits[name] = int(count)
    return BenchmarkConfig(
        dataset=args.dataset,
        split=args.split,
        methods=methods,
        limit=args.limit,
        method_limits={name: count for name, count in limits.items() if count},
        top_k=args.top_k,
        granularity=args.granularity,
        max_tokens=args.max_tokens,
        model=args.model,
        hidden_state_layer=args.hidden_state_layer,
        ig_steps=args.ig_steps,
        faithfulness=args.faithfulness,
        lds_samples=args.lds_samples,
        at2_estimator=args.at2_estimator,
        batch_size=args.batch_size,
        skip=args.skip,
        long_context=None
        if args.context_tokens is None
        else LongContext(args.context_tokens, args.gold_position, args.distractor_seed),
    )


def main(argv: Sequence[str] | None = None, methods: AttributionMethods | None = None) -> int:
    """Run the benchmark as the command line `argv` says, with the methods of `methods` (default: the
    built-in ones, [`default_methods`][rcattr.eval.attribution.methods.default_methods]); returns the exit status."""
    args = _parser().parse_args(argv)
    config = config_from_args(args)
    from rcattr.eval.attribution.report import markdown_table
    from rcattr.eval.attribution.runner import AttributionBenchmark

    return run_command(
        args,
        config.model,
        lambda model, tokenizer, shard: AttributionBenchmark(
            config, model, tokenizer, args.out, shard, methods=methods
        ),
        markdown_table,
    )
