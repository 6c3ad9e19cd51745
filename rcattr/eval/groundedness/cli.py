"""The groundedness benchmarks' command line, parsed before torch loads:

    python -m rcattr.eval.groundedness --out runs/groundedness

Tasks, `--task` any of them (default all but `errors` and `attributionbench`): the paired answer-level
tasks of [`rcattr.eval.groundedness.pairs`][rcattr.eval.groundedness.pairs] (`relevance`, `unanswerable`, `removed`), `unsupported`
tokens in edited QuoteSum / Veri-Gran answers, `errors`, the model's own SQuAD answers, and
`attributionbench`, claims of real answer engines against people's labels (read from `--claims-file`). The
run itself is
[`rcattr.eval.groundedness.benchmark.GroundednessRun`][rcattr.eval.groundedness.benchmark.GroundednessRun].
"""

from __future__ import annotations

import argparse

from rcattr.eval.common.command import benchmark_parser, stored_main
from rcattr.eval.common.run_args import add_folder_arguments
from rcattr.eval.common.run_store import ShardedRun
from rcattr.options import positive_int

PAIRED_TASKS = ("relevance", "unanswerable", "removed")  # rcattr.eval.groundedness.pairs.TASKS, without torch
TASKS = (*PAIRED_TASKS, "unsupported", "errors", "attributionbench")
DEFAULT_TASKS = TASKS[:-2]
CLAIMS_FILE = "../shared/data/attributionbench/dev.jsonl"  # attributionbench.DEFAULT_PATH, without torch


def _parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(
        "groundedness",
        (
            "Groundedness benchmarks: is the model's answer supported by the context? Answer level on SQuAD v2 "
            "(relevance: own vs another article's paragraph; unanswerable: answerable vs unanswerable "
            "questions; removed: the paragraph with vs without the answer sentence), AUROC of answer-level "
            "signals; token level on edited QuoteSum / Veri-Gran answers (unsupported), token AUROC and the "
            "result's flag rates; claim level on AttributionBench (attributionbench: sentences of real answer engines, "
            "judged by people), AUROC and macro-F1 of the library's support and marks, its levers and baselines "
            "(lexical coverage, the model asked as a judge). RC against log-probability, entropy, lookback ratio "
            "and random."
        ),
        data_help=False,
    )
    add_folder_arguments(parser, default_out="runs/groundedness")
    parser.add_argument(
        "--task",
        nargs="+",
        choices=TASKS,
        default=list(DEFAULT_TASKS),
        help="benchmarks to run (default: all but errors, the natural errors, and attributionbench, "
        "which reads --claims-file)",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=200,
        help="answer-level tasks: pairs per task, or questions for errors (default 200)",
    )
    parser.add_argument(
        "--records",
        type=positive_int,
        default=None,
        help="unsupported tokens: records read per dataset, before keeping those with an edit; attributionbench: "
        "claims drawn from the file with --seed (default all)",
    )
    parser.add_argument(
        "--claims-file",
        default=CLAIMS_FILE,
        help=f"attributionbench: the AttributionBench JSONL file, read by path (default {CLAIMS_FILE})",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=32,
        help="answer-level tasks: answer length cap (default 32)",
    )
    parser.add_argument(
        "--datasets",
        nargs="+",
        choices=("quotesum", "verigran"),
        default=["quotesum", "verigran"],
        help="unsupported tokens: datasets (default: both)",
    )
    parser.add_argument(
        "--max-edits", type=positive_int, default=2, help="unsupported tokens: edits per answer (default 2)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="other-paragraph draw, edits and random signals (default 0)"
    )
    return parser


def _run(args: argparse.Namespace) -> ShardedRun:
    from rcattr.eval.groundedness.benchmark import GroundednessRun

    return GroundednessRun(args)


main = stored_main(_parser, _run)
